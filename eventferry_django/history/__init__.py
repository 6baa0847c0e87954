"""The event-history pipeline: archive closed outbox rows to Parquet or a Delta table
with Spark, erase an aggregate from it, replay them into the outbox, and report on
delivery.

Nothing here imports pyspark at import time: the app, its commands' ``--help`` and
``manage.py check`` work without the ``spark`` extra. Modules that need Spark import it
inside the functions that start it (see :mod:`.session`).

- :mod:`.jdbc`: the JDBC URL, driver and credentials of a Django ``DATABASES`` entry.
- :mod:`.session`: a SparkSession from ``EVENTFERRY["SPARK"]``, or one clear error.
- :mod:`.layout`: where an archive keeps runs, staging, manifests and its lock.
- :mod:`.manifest`: what a committed run records, and what it says is archived.
- :mod:`.storage`: file operations on the archive through Hadoop's FileSystem.
- :mod:`.source`: the outbox table read through Spark's JDBC source, by id range.
- :mod:`.archive`: freeze, read, write, verify, commit, purge.
- :mod:`.run_tables`: how a run is committed, read back and undone, per format
  (Parquet runs with manifests, or Delta commits through :mod:`.delta`).
- :mod:`.delta` and :mod:`.delta_reader`: the Delta table through delta-rs, and Spark
  reading its files.
- :mod:`.erasure` and :mod:`.parquet_rewrite`: forgetting an aggregate on disk.
- :mod:`.compaction`: merging a Delta archive's small files.
- :mod:`.reader`: committed runs only, for every reader.
- :mod:`.replay`: a slice of the archive back into the outbox.
- :mod:`.figures`: the delivery figures a report holds.
- :mod:`.report` and :mod:`.report_files`: computing them, and the files that show them.
- :mod:`.errors`: what stops a command, and its exit code.
"""
