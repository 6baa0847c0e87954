"""Each vendor's claim, as committed in ``eventferry_django/store/claims/<vendor>.sql``:
the file holds the statements the claim sends, named, and these tests keep it equal to
the code and to what the code sends. ``EVENTFERRY_UPDATE_GOLDEN=1 pytest
tests/test_claim_sql.py`` rewrites the files after a change to the claim: review the diff.

These run without any database; the T-SQL is parsed by sqlglot besides.
"""

from __future__ import annotations

import itertools
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from eventferry_django.naming import TableName
from eventferry_django.store import VENDORS, dialect_for
from eventferry_django.store.claim import ALL_BUCKETS, ClaimRequest
from eventferry_django.store.microsoft import MicrosoftDialect
from eventferry_django.store.microsoft_claim import MicrosoftClaim
from eventferry_django.store.sql import Fragment, Slot

from .test_ddl_golden import RecordingCursor
from .tsql import as_tsql_parameters, parse_tsql

CLASSES = {"postgresql": "PostgresqlClaim", "mysql": "MysqlClaim",
           "microsoft": "MicrosoftClaim", "sqlite": "SqliteClaim"}


def committed(vendor: str) -> Path:
    return Path(str(resources.files("eventferry_django.store").joinpath(
        "claims", f"{vendor}.sql")))


def named(sql: str, params: list[Any]) -> str:
    """``sql`` with each placeholder showing the slot (or value) it is bound to."""
    values = iter(params)
    return re.sub(r"(?<!%)%s", lambda _: f"%({value})s" if isinstance(
        value := next(values), Slot) else f"%({value!r})s", sql)


def claim_file(vendor: str) -> str:
    """The committed file's text for ``vendor``: a header, then each statement under
    ``-- name:``."""
    statements = dialect_for(vendor, TableName("outbox")).claim.statements()
    header = (
        f"-- The claim on {vendor}, statement by statement, for the outbox named \"outbox\":\n"
        f"-- what eventferry_django/store/{'microsoft' if vendor == 'microsoft' else vendor}"
        f".py ({CLASSES[vendor]}) sends. Each\n"
        "-- %(name)s is a value bound by name (see eventferry_django/store/claim.py).\n"
        "-- Written by the code and kept equal to it by tests/test_claim_sql.py: never\n"
        "-- edit it; after a change to the claim run\n"
        "-- EVENTFERRY_UPDATE_GOLDEN=1 pytest tests/test_claim_sql.py, and review the diff.\n"
    )
    blocks = [f"-- name: {name}\n{named(sql, params).rstrip(';')};\n"
              for name, (sql, params) in statements.items()]
    return header + "\n" + "\n".join(blocks)


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_committed_claim_is_the_codes(vendor: str) -> None:
    path, text = committed(vendor), claim_file(vendor)
    if os.environ.get("EVENTFERRY_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text, (
        f"{path} differs from the code; review, then rewrite it (see the module docstring)")


class SentCursor(RecordingCursor):
    """Records what a claim sends; its reads answer as a database holding one candidate
    head ``1`` of aggregate ``a``, with one row ``2`` behind it, would; ``hindered``: and
    a row outside the windows that could stand before a head (MariaDB's check)."""

    def __init__(self, hindered: bool) -> None:
        super().__init__()
        self.hindered = hindered

    def fetchone(self) -> tuple[Any, ...]:
        return (int(not self.hindered),)

    def fetchall(self) -> list[tuple[Any, ...]]:
        sql = self.statements[-1][0]
        if "THEN 1 ELSE 0 END FROM" in sql:
            return [(2, "a", 1)]  # MariaDB's chain read: id, aggregate, claimable
        if "c.`next_retry_at` <=" in sql:
            return []  # no overdue head
        return [(1, "a")]


def one_id_each(sql: str, values: list[Any]) -> tuple[str, list[Any]]:
    """A statement sent with a list of ids or buckets (MariaDB's ``IN (%s, %s, ...)``) as
    committed: with one, and the values of the others left out."""
    text, kept, rest = [], [], iter(values)
    for piece in re.split(r"(IN \((?:%s, )*%s\)|(?<!%)%s)", sql):
        if piece.startswith("IN (") or piece == "%s":
            kept.append(next(rest))
            for _ in range(piece.count("%s") - 1):
                next(rest)
            piece = "IN (%s)" if piece.startswith("IN (") else piece
        text.append(piece)
    return "".join(text), kept


#: Requests that, between them, send every statement of every vendor's claim.
REQUESTS = [
    ClaimRequest(500, max_chain=2, passing=300),
    ClaimRequest(500, max_chain=2, buckets=(7,), passing=300),
    ClaimRequest(500, max_chain=1),
    ClaimRequest(500, max_chain=1, buckets=(7,)),
]


def bound(vendor: str, slot: str, value: Any, request: ClaimRequest) -> tuple[Any, ...]:
    """The values a slot may be sent with: the request's, and on MariaDB, whose reads of
    overdue rows bind their size themselves, as many more heads as rows are passed over
    (an overdue row in flight is found, then passed over)."""
    if vendor == "mysql" and slot == "heads":
        return value, value + request.passing
    return (value,)


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_claim_sends_the_committed_statements_and_each_of_them(vendor: str) -> None:
    """Every statement a claim sends is one of those committed, the request's values bound
    where its slots say; and each committed statement is sent by some request."""
    claim = dialect_for(vendor, TableName("outbox")).claim
    statements = claim.statements()
    by_sql = {sql: (name, params) for name, (sql, params) in statements.items()}
    used = set()
    for request, hindered in itertools.product(REQUESTS, (False, True)):
        cursor = SentCursor(hindered)
        claim.run(cursor, request, ["x"])
        slots = claim.slots(request, ["x"])
        for sent in cursor.statements:
            sql, values = one_id_each(*sent)
            assert sql in by_sql, f"{vendor} sent a statement not committed:\n{sql}"
            name, params = by_sql[sql]
            used.add(name)
            assert len(values) == len(params), (vendor, name)
            for value, slot in zip(values, params, strict=True):
                # The request's own slots; a candidate's, a head's or a bucket's vary.
                if isinstance(slot, Slot) and slot in slots:
                    assert value in bound(vendor, slot, slots[slot], request), (vendor, name, slot)
    assert used == set(statements), f"never sent: {set(statements) - used}"


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_claim_reads_no_window_of_rows_without_a_bucket_and_writes_nothing(
        vendor: str) -> None:
    """Rows without a bucket wait for the bucket filler, which gives them theirs: read
    oldest first, they are among the fresh rows; bucket by bucket, no window reads them.
    And no statement of the claim writes a row or locks one."""
    for name, (sql, _) in dialect_for(vendor, TableName("outbox")).claim.statements().items():
        # PostgreSQL asks whether there is any (one seek, whether to probe the heads).
        windows = re.sub(r"NOT EXISTS \(SELECT 1 FROM \S+ AS x WHERE [^)]*\)", "", sql)
        assert not re.search(r"bucket\W*\s+IS NULL", windows), (vendor, name)
        assert not re.search(r"\bUPDATE\b|\bDELETE\b|FOR UPDATE|UPDLOCK", sql), (vendor, name)
        assert all(target.startswith("@") for target in re.findall(r"INSERT INTO (\S+)", sql)), (
            vendor, name)


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_claim_binds_the_requests_own_values(vendor: str) -> None:
    """No vendor clamps or reads the request by itself: the slots are the request's."""
    request = ClaimRequest(300, heads=50, max_chain=4, buckets=(1, 2, 3))
    slots = dialect_for(vendor, TableName("outbox")).claim.slots(request)
    assert (slots["limit"], slots["heads"], slots["max_chain"]) == (300, 50, 4)
    assert slots["window"] == -(-2 * 50 // 3)
    assert ClaimRequest(10, heads=50).most_heads == 10


def test_a_claim_reads_twice_its_heads_and_the_rows_it_passes_over() -> None:
    assert ClaimRequest(500).window == 1000
    assert ClaimRequest(500, passing=1000).window == 2000
    assert ClaimRequest(500, buckets=ALL_BUCKETS).window == 4
    assert ClaimRequest(500, buckets=ALL_BUCKETS, passing=500).window == 6
    assert ClaimRequest(500, buckets=(1,)).window == 1000


# -- SQL Server's batch, parsed ----------------------------------------------------------------
def tsql_claim(name: TableName | None = None) -> MicrosoftClaim:
    claim = MicrosoftDialect(name or TableName("outbox", "messaging")).claim
    assert isinstance(claim, MicrosoftClaim)
    return claim


@pytest.mark.parametrize("by_bucket", [False, True])
def test_tsql_claim_batch_parses_and_writes_or_locks_nothing(by_bucket: bool) -> None:
    """The claim: one batch in the caller's transaction, every statement of it parsed,
    that writes nothing but its table variables."""
    claim = tsql_claim()
    batch, params = claim.claim_sql(by_bucket)
    parts: list[Fragment] = [claim.in_flight_sql(), claim.candidates.sql(by_bucket),
                             claim.heads_sql(), claim.count_sql(), claim.picked_sql()]
    for sql, _ in parts:
        assert sql in batch
        parse_tsql(as_tsql_parameters(sql))
    for declared in claim.declare_sql().split(";\n"):
        parse_tsql(declared)
    statements = sqlglot.parse(as_tsql_parameters(batch), read="tsql")
    assert all(s is not None for s in statements)
    commands = [n.sql() for s in statements if s is not None for n in s.walk()
                if isinstance(n, exp.Command)]
    assert not commands, f"sqlglot could not parse: {commands}"
    assert batch.count("%s") == len(params)
    assert "SYSUTCDATETIME()" in batch and "GETDATE" not in batch
    for absent in ("UPDLOCK", "UPDATE ", "TRANSACTION", "XACT_ABORT", "ISOLATION LEVEL"):
        assert absent not in batch
    # Each window is read four times as wide, the aggregates in flight passed over after;
    # the overdue rows pass them over too.
    assert batch.count("@in_flight AS i") == 2
    # Bucket by bucket, the overdue rows of the claim's buckets only.
    assert ("o.[bucket] IN (SELECT b.[bucket] FROM OPENJSON(" in batch) is by_bucket


def test_tsql_claim_never_lets_a_later_row_out_first() -> None:
    claim = tsql_claim()
    (candidates, _), (heads, _), (picked, _) = (
        claim.candidates.sql(True), claim.heads_sql(), claim.picked_sql())
    # The candidates are read skipping rows being written.
    assert candidates.count("WITH (READCOMMITTEDLOCK, READPAST)") == 2  # the window, overdue
    # The heads: READPAST on the read, never on the head probe, which waits.
    read, probe = heads.split("NOT EXISTS", 1)
    assert "WITH (READCOMMITTEDLOCK, READPAST)" in read
    assert "WITH (READCOMMITTEDLOCK)" in probe and "READPAST" not in probe
    heads_tree = parse_tsql(as_tsql_parameters(heads))
    assert isinstance(heads_tree, exp.Insert) and "@heads" in heads_tree.sql("tsql")
    # The chain walk: no READPAST (a skipped row would let a later one out first), and it
    # stops at the first row not claimable by its own state.
    picked_tree = parse_tsql(as_tsql_parameters(picked))
    walk = picked_tree.find(exp.Lateral)
    assert walk is not None and "CROSS APPLY" in walk.sql("tsql")
    assert "READPAST" not in picked and "WITH (READCOMMITTEDLOCK)" in picked
    assert "OVER (ORDER BY c.[id] ROWS UNBOUNDED PRECEDING) AS unbroken" in picked
    assert "r.unbroken = 1" in picked and "c.[id] > h.[id]" in picked
    # Each chain reads at most its head's share of the batch, from the count of heads.
    assert "@taken" in picked and "h.[rank]" in picked


def test_tsql_claim_batch_gives_back_its_row_counts_before_the_rows() -> None:
    """NOCOUNT is on while the table variables fill and off before the rows are read, so
    the rows are the batch's first result and the connection keeps its row counts after
    it, however the driver sends the batch."""
    for by_bucket in (False, True):
        batch, _ = tsql_claim(TableName("outbox")).claim_sql(by_bucket)
        assert batch.startswith("SET NOCOUNT ON;\n")
        assert batch.count("SET NOCOUNT") == 2
        before, rows = batch.split("SET NOCOUNT OFF;\n", 1)
        assert "SELECT o.[id]" in rows and "INSERT" not in rows and "SELECT o.[id]" not in before


def test_tsql_claim_reads_status_as_literals_the_filtered_indexes_can_match() -> None:
    """A filtered index serves only predicates the optimizer can prove lie inside its
    filter when the plan is compiled: literals, not parameters. Every status the claim's
    reads compare is a literal inside the claim index's filter, and the bucket windows
    repeat the bucket index's filter word for word. (Under PARAMETERIZATION FORCED they
    stay literals: the claim is sent already parameterized, and such statements are left
    alone.)"""
    claim = tsql_claim(TableName("outbox"))
    schema = MicrosoftDialect(TableName("outbox")).schema
    for by_bucket in (False, True):
        candidates, _ = claim.candidates.sql(by_bucket)
        assert not re.search(r"\[status\]\s*(=|<>|IN)\s*\(?\s*(%s|@)", candidates)
        read = {int(code) for code in re.findall(r"\.\[status\] = (\d)", candidates)}
        assert read and read <= {0, 1, 3}
    claim_index = next(i for i in schema.outbox.indexes if i.open_rows_only)
    assert schema.index_definition(claim_index).endswith("WHERE [status] IN (0, 1, 3)")
    bucket_index = next(i for i in schema.outbox.indexes if i.fresh_rows_only)
    bucket_filter = schema.index_definition(bucket_index).split(" WHERE ", 1)[1]
    window, _ = claim.window_sql(("= b.[bucket]", []), ("%s", [None]))
    assert bucket_filter.replace("[", "f.[") in window
