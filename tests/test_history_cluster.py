"""The history commands on a real Spark standalone cluster (a master and a worker
started from pyspark's jars on loopback): archive, report and replay run with
``--master spark://...``, their tasks run in the worker's executors, and the JDBC
driver's jar reaches those executors.

One cluster for the whole run (the ``spark_cluster`` fixture) and one test, because each command starts a driver JVM
and the worker an executor JVM for it: this is the costliest Spark test in the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from django.conf import settings

from eventferry_django.conf import get_settings
from eventferry_django.history.jdbc import outbox_source
from eventferry_django.history.replay import REPLAY_ID_HEADER
from eventferry_django.history.session import jdbc_jars
from eventferry_django.models import OutboxEvent, Status

from .history_data import seed
from .relay_process import ROOT, relay_env
from .spark_cluster import StandaloneCluster, cluster_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def manage(cluster: StandaloneCluster, *args: str) -> str:
    """A history command in a process of its own (one SparkContext per process), as a
    scheduler would run it, on ``cluster``."""
    # The suite's Spark settings, and a small executor with the driver's quick JIT: the
    # worker has one core and 1 GB.
    spark = settings.EVENTFERRY["SPARK"]
    spark = {**spark, "CONF": {
        **spark["CONF"], "spark.sql.shuffle.partitions": 2, "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": spark["CONF"]["spark.driver.extraJavaOptions"]}}
    env = {**relay_env({**settings.EVENTFERRY, "SPARK": spark}), **{
        k: v for k, v in cluster_env().items() if k.startswith(("SPARK_", "PYSPARK_"))}}
    done = subprocess.run(
        [sys.executable, "-m", "django", *args, "--master", cluster.master_url],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_archive_report_and_replay_run_on_a_standalone_cluster(
        spark_cluster: StandaloneCluster, tmp_path: Path) -> None:
    cluster = spark_cluster
    if outbox_source().driver_name == "jtds":
        pytest.skip("Spark cannot read the outbox through jTDS on the T-SQL endpoint")
    seed()
    root = str(tmp_path / "archive")

    # As a Delta table: the executors write its files, the driver commits them.
    archived = manage(cluster, "outbox_archive", "--to", root, "--older-than", "1d",
                      "--status", "both", "--purge", "--format", "delta")
    assert "Archived 9,400 row(s)" in archived and "purged 9,400" in archived, archived
    assert pl.read_delta(root).height == 9_400
    assert OutboxEvent.objects.count() == 600

    reported = manage(cluster, "outbox_report", "--from", root, "--out", str(tmp_path / "r"))
    assert "Reported 9,400 event(s) over 4 topic(s)" in reported, reported

    replayed = manage(cluster, "outbox_replay", "--from", root, "--topic", "order.paid")
    copies = OutboxEvent.objects.filter(status=Status.PENDING, topic="order.paid",
                                        headers__contains=REPLAY_ID_HEADER)
    assert copies.count() > 2_000 and f"{copies.count():,}" in replayed, replayed

    # The master ran the three applications to completion on its one worker ...
    state = cluster.state()
    applications = state["completedapps"] + state["activeapps"]
    assert [a["name"] for a in applications].count("eventferry") == 3, applications
    assert all(a["state"] == "FINISHED" for a in state["completedapps"])
    # ... whose executors did the work, each with the JDBC driver's jar it fetched from
    # the driver (spark.jars), so the JDBC reads ran on the executors.
    executors = cluster.executor_dirs()
    assert len(executors) >= 3, executors
    # Spark serves a symlinked jar (Debian's sqlite-jdbc.jar) under its target's name.
    jar = Path(jdbc_jars(get_settings().spark, outbox_source())[0]).resolve().name
    # (An application whose executor was lost, on a loaded machine, has a second one that
    # may have had no task to fetch the jar for: each application needs the jar once.)
    for application in {e.parent for e in executors}:
        assert any((e / jar).is_file() for e in executors if e.parent == application), \
            [sorted(e.iterdir()) for e in executors if e.parent == application]
    assert any("Finished task" in (e / "stderr").read_text() for e in executors)
