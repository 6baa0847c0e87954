"""A vendor's dialect: its SQL for one outbox, as several small parts, as a Django backend
is several small objects.

``ops`` spells what every part writes (identifiers, the clock, bound times, the locking
clause); ``features`` holds flags only; ``schema`` (the DDL of any table of the
contract), ``inserts`` (``publish_event()``'s INSERT), ``claim`` (the claim),
``settlement`` (ack, fail, bury), ``purge`` (batch deletes), ``inbox``
(the consumers' inbox), ``statistics`` (the planner statistics a relay looks after),
``closed_rows`` (the history pipeline's SQL), ``claimable`` (the status's probes) and
``bucket_fill`` (buckets for rows written without one) each do one concern. Each vendor
module subclasses the parts whose spelling differs and names them in its dialect's
``*_class`` attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..naming import TableName
from .bucket_fill import BucketFillSql
from .claim import ClaimSql
from .claimable import ClaimableSql
from .features import Features
from .inbox_sql import InboxSql
from .inserts import InsertSql
from .ops import SqlOps
from .purge import PurgeSql
from .settlement_sql import SettlementSql
from .statistics_sql import StatisticsSql

if TYPE_CHECKING:
    from .closed_rows import ClosedRowsSql
    from .schema import SchemaSql


class Dialect:
    """One vendor's SQL for the outbox named at construction, every concern in a part
    composed here. Subclasses name the vendor and their parts."""

    vendor: ClassVar[str]
    ops_class: ClassVar[type[SqlOps]]
    claim_class: ClassVar[type[ClaimSql]]
    schema_class: ClassVar[type[SchemaSql]]
    closed_rows_class: ClassVar[type[ClosedRowsSql]]
    features_class: ClassVar[type[Features]] = Features
    inserts_class: ClassVar[type[InsertSql]] = InsertSql
    settlement_class: ClassVar[type[SettlementSql]] = SettlementSql
    purge_class: ClassVar[type[PurgeSql]] = PurgeSql
    inbox_class: ClassVar[type[InboxSql]] = InboxSql
    statistics_class: ClassVar[type[StatisticsSql]] = StatisticsSql

    def __init__(self, name: TableName, *, native_json: bool = False) -> None:
        #: How this vendor spells what every part writes, for this outbox.
        self.ops = self.ops_class(name, native_json=native_json)
        self.name = self.ops.name
        self.table = self.ops.table
        self.native_json = native_json
        #: What this vendor does differently, as flags.
        self.features = self.features_class(self.ops)
        #: The DDL of this outbox and of the inbox.
        self.schema = self.schema_class(self.ops)
        #: ``publish_event()``'s SQL: the INSERT of new events.
        self.inserts = self.inserts_class(self.ops)
        #: The claim.
        self.claim = self.claim_class(self.ops)
        #: The settlement of claimed rows.
        self.settlement = self.settlement_class(self.ops)
        #: Batch deletes of old rows, of this outbox and of the inbox.
        self.purge = self.purge_class(self.ops)
        #: The consumers' inbox's SQL.
        self.inbox = self.inbox_class(self.ops, self.schema, self.purge)
        #: The relay's care of the planner statistics (see store/statistics.py).
        self.statistics = self.statistics_class(self.ops)
        #: The history pipeline's SQL over this outbox.
        self.closed_rows = self.closed_rows_class(self.ops)
        #: The probes for the oldest row a relay could claim now (the status's gauge).
        self.claimable = ClaimableSql(self.claim)
        #: Buckets for the fresh rows written without one (see store/bucket_fill.py).
        self.bucket_fill = BucketFillSql(self.claim)
