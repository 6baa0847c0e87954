"""The benchmarks' PostgreSQL database, created on first use."""

from __future__ import annotations

import psycopg


def ensure_database(name: str) -> None:
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
