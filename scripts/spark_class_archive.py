"""Write a class-data-sharing archive of the classes a Spark job loads, for the test
suite's JVMs to map instead of loading and verifying each class again.

    .venv/bin/python scripts/spark_class_archive.py .venv/spark-classes.jsa

The suite starts many JVMs (its SparkSession per leg, and the archive, Delta, erasure
and cluster tests' processes that it kills or runs apart): with the archive each starts
on about half the CPU. tests/settings.py uses it when it exists; a JVM whose classpath no
longer matches it (another pyspark) runs without it, silently. Java 17 has no
``-XX:+AutoCreateSharedArchive``, hence this one run that dumps at exit.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def main(archive: str) -> int:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    target = Path(archive).resolve()
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    session = (SparkSession.builder.master("local[2]").appName("spark-class-archive")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.codegen.wholeStage", "false")
               .config("spark.driver.extraJavaOptions",
                       f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off")
               .getOrCreate())
    # What the history jobs do, small: a grouped aggregate, a Parquet round trip.
    with tempfile.TemporaryDirectory() as tmp:
        frame = session.range(10_000).selectExpr("id", "id % 7 AS topic", "uuid() AS key")
        frame.groupBy("topic").count().collect()
        frame.write.parquet(f"{tmp}/rows")
        session.read.parquet(f"{tmp}/rows").where("topic = 3").count()
    session.stop()
    # The JVM writes the archive as it exits: end it (its stdin closed) and wait.
    gateway = SparkContext._gateway
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=120)
    if not partial.exists():
        print(f"spark-class-archive: the JVM wrote no {partial}", file=sys.stderr)
        return 1
    partial.replace(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
