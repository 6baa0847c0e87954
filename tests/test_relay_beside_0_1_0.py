"""A relay of 0.1.0 left running after migration 0003, beside a relay of this release:
it claims nothing (every claim of its fails on ``CK_<outbox>_claimed_needs_0_2``, which
its log names), and this release's relay, which counts it as an earlier release's and so
wants every bucket, delivers everything once.

The 0.1.0 relay is that release's own code (``git archive`` of its commit), run as a
process with this tree's installed dependencies against the test database."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status

from .relay_process import ROOT, start_relay, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

#: The commit of release 0.1.0 ("Release 0.1.0" in the history).
RELEASE_0_1_0 = "f098c2c"
FILE_PUBLISHER = "tests.process_publishers.FilePublisher"


@pytest.fixture(scope="module")
def release_0_1_0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Release 0.1.0's files, as ``git archive`` gives them."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", RELEASE_0_1_0],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"no git history with release 0.1.0's commit here: {archive.stderr!r}")
    tree = tmp_path_factory.mktemp("eventferry-0.1.0")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def test_a_0_1_0_relay_claims_nothing_and_this_releases_delivers_everything_once(
    tmp_path: Path, release_0_1_0: Path,
) -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "order", f"o{n % 5}") for n in range(40)])
    out = tmp_path / "published.jsonl"
    settings = {"PUBLISHER": {"BACKEND": FILE_PUBLISHER, "OPTIONS": {"path": str(out)}}}
    old_log, new_log = tmp_path / "relay-0.1.0.log", tmp_path / "relay.log"
    old = start_relay(settings, "--poll-interval", "0.1", "--relay-id", "old", log=old_log,
                      root=release_0_1_0)
    try:
        wait_until(lambda: "claimed_needs_0_2" in old_log.read_text().lower(), timeout=60,
                   what="the 0.1.0 relay's claim to fail on the constraint")
        # One that shares the buckets, as relays run in production: it sees the 0.1.0
        # relay check in.
        new = start_relay(settings, "--poll-interval", "0.1", "--relay-id", "new",
                          log=new_log)
        try:
            wait_until(lambda: not OutboxEvent.objects.open().exists(), timeout=60,
                       what="this release's relay to deliver everything")
        finally:
            new.send_signal(signal.SIGTERM)
            assert new.wait(30) == 0, new_log.read_text()
        assert old.poll() is None, old_log.read_text()  # refused, not crashed
    finally:
        old.send_signal(signal.SIGTERM)
        old.wait(30)
    assert list(OutboxEvent.objects.values_list("status", "attempts").distinct()) == [
        (Status.DONE, 0)]
    published = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(p["id"] for p in published) == sorted(
        OutboxEvent.objects.values_list("id", flat=True))  # each once, by this release's
    if connection.vendor != "sqlite":  # whose relays never share: nothing to look at
        assert "a relay of an earlier release is running" in new_log.read_text()
