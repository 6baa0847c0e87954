"""The report's figures computed in SQL, per vendor, straight from the outbox table:
what outbox_report's Spark figures must equal."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.db import connection

from eventferry_django.conf import get_settings
from eventferry_django.store import dialect_for

Key = tuple[str, str, str, str]  # topic, hour, figure, key

# The hour (UTC, as the CSV writes it) and the latency in ms, per vendor.
HOUR = {
    "postgresql": "to_char(processed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24\":00Z\"')",
    "mysql": "DATE_FORMAT(processed_at, '%%Y-%%m-%%dT%%H:00Z')",
    "sqlite": "strftime('%%Y-%%m-%%dT%%H:00Z', processed_at)",
}
LATENCY = {
    "postgresql": "EXTRACT(EPOCH FROM processed_at - created_at) * 1000",
    "mysql": "TIMESTAMPDIFF(MICROSECOND, created_at, processed_at) / 1000",
    "sqlite": "((CAST(strftime('%%s', processed_at) AS INTEGER) * 1000 "
              "+ CAST(substr(strftime('%%f', processed_at), 4) AS INTEGER)) "
              "- (CAST(strftime('%%s', created_at) AS INTEGER) * 1000 "
              "+ CAST(substr(strftime('%%f', created_at), 4) AS INTEGER)))",
}
PERCENTILES = ((0.5, "latency_p50_ms"), (0.95, "latency_p95_ms"), (0.99, "latency_p99_ms"))


def _rows(sql: str, params: Iterable[object] = ()) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return list(cursor.fetchall())


def sql_figures(before: dt.datetime | None = None) -> dict[Key, float]:
    """Every figure of figures.csv, for closed rows processed before ``before``."""
    vendor = connection.vendor
    table = dialect_for(vendor, get_settings().table_name).table
    where = "status IN (2, 4)"
    params: list[object] = []
    if before is not None:
        processed = ("strftime('%%Y-%%m-%%d %%H:%%M:%%f', processed_at)" if vendor == "sqlite"
                     else "processed_at")
        where += f" AND {processed} < %s"
        params.append(before.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if vendor == "sqlite"
                      else before if vendor == "postgresql" else before.replace(tzinfo=None))
    hour = HOUR[vendor]
    closed = (f"SELECT topic, {hour} AS hour, status, attempts, last_error, "
              f"CASE WHEN status = 2 THEN {LATENCY[vendor]} END AS latency "
              f"FROM {table} WHERE {where}")
    figures: dict[Key, float] = {}
    for scope in ("topic, hour", "topic"):
        hour_column = "hour" if scope != "topic" else "''"
        for topic, hour_value, events, done, dead in _rows(
            f"SELECT topic, {hour_column}, COUNT(*), SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN status = 4 THEN 1 ELSE 0 END) FROM ({closed}) c GROUP BY {scope}",
            params,
        ):
            figures[(str(topic), str(hour_value), "events", "")] = float(events)  # type: ignore[arg-type]
            figures[(str(topic), str(hour_value), "done", "")] = float(done)  # type: ignore[arg-type]
            figures[(str(topic), str(hour_value), "dead", "")] = float(dead)  # type: ignore[arg-type]
        for topic, hour_value, attempts, events in _rows(
            f"SELECT topic, {hour_column}, attempts, COUNT(*) FROM ({closed}) c "
            f"GROUP BY {scope}, attempts", params,
        ):
            figures[(str(topic), str(hour_value), "attempts", str(attempts))] = float(events)  # type: ignore[arg-type]
        for topic, hour_value, error, events in _rows(
            f"SELECT topic, {hour_column}, COALESCE(last_error, '(no error recorded)'), COUNT(*) "
            f"FROM ({closed}) c WHERE status = 4 GROUP BY {scope}, last_error", params,
        ):
            figures[(str(topic), str(hour_value), "dead_by_error", str(error))] = float(events)  # type: ignore[arg-type]
        for topic, hour_value, values in _percentiles(closed, params, scope, hour_column):
            for (_, name), value in zip(PERCENTILES, values, strict=True):
                figures[(topic, hour_value, name, "")] = round(value, 3)
    return figures


def _percentiles(closed: str, params: list[object], scope: str,
                 hour_column: str) -> list[tuple[str, str, list[float]]]:
    """Exact percentiles with linear interpolation (percentile_cont) of the done rows'
    latency: PostgreSQL and MariaDB have the function; on SQLite it is spelled out
    with window functions."""
    vendor = connection.vendor
    done = f"SELECT * FROM ({closed}) c WHERE status = 2"
    if vendor == "postgresql":
        fractions = ", ".join(str(p) for p, _ in PERCENTILES)
        return [(str(t), str(h), [float(v) for v in values]) for t, h, values in _rows(
            f"SELECT topic, {hour_column}, percentile_cont(ARRAY[{fractions}]) WITHIN GROUP "
            f"(ORDER BY latency) FROM ({done}) d GROUP BY {scope}", params)]
    if vendor == "mysql":
        columns = ", ".join(
            f"PERCENTILE_CONT({p}) WITHIN GROUP (ORDER BY latency) OVER (PARTITION BY {scope})"
            for p, _ in PERCENTILES)
        return sorted({(str(t), str(h), tuple(float(v) for v in values))  # type: ignore[misc]
                       for t, h, *values in _rows(
                           f"SELECT topic, {hour_column}, {columns} FROM ({done}) d", params)})
    # SQLite has no percentile function: rank the latencies, then interpolate between
    # the ranks around 1 + p * (n - 1).
    ranked = (f"SELECT topic, {hour_column} AS h, latency, "
              f"ROW_NUMBER() OVER (PARTITION BY {scope} ORDER BY latency) AS r, "
              f"COUNT(*) OVER (PARTITION BY {scope}) AS n FROM ({done}) d")
    fractions = " UNION ALL ".join(f"SELECT {p} AS p" for p, _ in PERCENTILES)
    rows = _rows(
        f"WITH ranked AS ({ranked}), targets AS (SELECT DISTINCT topic, h, p, "
        f"1 + p * (n - 1) AS pos FROM ranked CROSS JOIN ({fractions}) f) "
        "SELECT t.topic, t.h, t.p, lo.latency + (t.pos - CAST(t.pos AS INTEGER)) "
        "* (COALESCE(hi.latency, lo.latency) - lo.latency) FROM targets t "
        "JOIN ranked lo ON lo.topic = t.topic AND lo.h = t.h AND lo.r = CAST(t.pos AS INTEGER) "
        "LEFT JOIN ranked hi ON hi.topic = t.topic AND hi.h = t.h "
        "AND hi.r = CAST(t.pos AS INTEGER) + 1 ORDER BY t.topic, t.h, t.p", params)
    groups: dict[tuple[str, str], list[float]] = {}
    for topic, hour_value, _, value in rows:
        groups.setdefault((str(topic), str(hour_value)), []).append(float(value))  # type: ignore[arg-type]
    return [(topic, hour_value, values) for (topic, hour_value), values in groups.items()]
