"""What the history commands hand the pipeline, without starting Spark: outbox_archive's
purge sizes, and --batch-size, their deprecated spelling."""

from __future__ import annotations

import datetime as dt
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from eventferry_django.history.archive import ArchiveRequest, ArchiveResult
from eventferry_django.history.errors import EXIT_USAGE, HistoryError
from eventferry_django.history.masters import master_problem
from eventferry_django.management.commands import outbox_archive


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[ArchiveRequest]:
    """The requests outbox_archive makes, each answered with an empty dry run."""
    made: list[ArchiveRequest] = []

    def archive(request: ArchiveRequest, progress: Any = None) -> ArchiveResult:
        made.append(request)
        return ArchiveResult(cutoff=dt.datetime(2026, 11, 20, tzinfo=dt.UTC), dry_run=True)

    monkeypatch.setattr(outbox_archive, "archive", archive)
    return made


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("outbox_archive", "--to", "/nowhere", "--purge", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def sizes(request: ArchiveRequest) -> tuple[int, int]:
    return request.purge_range_size, request.purge_batch_size


def test_the_purge_sizes_default_to_wide_ranges_and_sql_servers_delete_bound(
        requests: list[ArchiveRequest]) -> None:
    assert run() == ("Would archive 0 row(s) processed before 2026-11-20T00:00:00Z.\n", "")
    assert sizes(requests[0]) == (100_000, 4_000)


def test_the_purge_range_and_batch_sizes_are_options_of_their_own(
        requests: list[ArchiveRequest]) -> None:
    assert run("--purge-range-size", "50000", "--purge-batch-size", "500")[1] == ""
    assert run("--purge-batch-size", "500")[1] == ""
    assert run("--purge-range-size", "9000")[1] == ""
    assert [sizes(r) for r in requests] == [(50_000, 500), (100_000, 500), (9_000, 4_000)]


def test_batch_size_still_sets_both_with_a_deprecation_warning(
        requests: list[ArchiveRequest]) -> None:
    out, err = run("--batch-size", "700")
    assert sizes(requests[0]) == (700, 700)
    assert err == ("DeprecationWarning: outbox_archive --batch-size is deprecated; it stands "
                   "for --purge-range-size 700 --purge-batch-size 700: use those.\n")
    assert "Would archive 0 row(s)" in out


@pytest.mark.parametrize("new", ["--purge-range-size", "--purge-batch-size"])
def test_batch_size_with_a_new_option_is_a_usage_error(
        requests: list[ArchiveRequest], new: str) -> None:
    with pytest.raises(CommandError, match="old spelling") as error:
        run("--batch-size", "700", new, "800")
    assert error.value.returncode == EXIT_USAGE
    assert requests == []


@pytest.mark.parametrize(("option", "value"), [
    ("--purge-batch-size", "10001"), ("--purge-batch-size", "0"), ("--batch-size", "10001"),
    ("--purge-range-size", "1000001"), ("--purge-range-size", "0"),
])
def test_purge_sizes_out_of_range_are_argument_errors(
        requests: list[ArchiveRequest], option: str, value: str) -> None:
    with pytest.raises(CommandError, match="out of range"):
        run(option, value)
    assert requests == []


@pytest.mark.parametrize("sizes", [{"purge_batch_size": 10_001}, {"purge_batch_size": 0},
                                   {"purge_range_size": 1_000_001}, {"purge_range_size": 0}])
def test_an_archive_request_checks_its_purge_sizes(sizes: dict[str, int]) -> None:
    with pytest.raises(HistoryError, match=r"must be 1\.\."):
        ArchiveRequest(path="/nowhere", older_than=dt.timedelta(days=1), **sizes)


@pytest.mark.parametrize("master", ["local[*]", "local", "local[2]", "local[*,3]",
                                    "local-cluster[2,1,1024]", "spark://127.0.0.1:7077",
                                    "spark://m1:7077,m2:7077", "yarn",
                                    "k8s://https://10.0.0.1:6443", "k8s://kube:443"])
def test_spark_master_urls_of_every_kind_are_accepted(
        requests: list[ArchiveRequest], master: str) -> None:
    assert master_problem(master) is None
    run("--master", f" {master} ")
    assert requests[0].master == master


@pytest.mark.parametrize("master", ["spark://master", "mesos://zk:2181", "local[0]",
                                    "local[two]", "k8s://", "yarn-client", "sc://connect:15002"])
def test_a_bad_master_is_an_argument_error_before_spark_starts(
        requests: list[ArchiveRequest], master: str) -> None:
    with pytest.raises(CommandError, match=r"is not a Spark master URL; use one of local\[\*\]"):
        run("--master", master)
    assert requests == []
