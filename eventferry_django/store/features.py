"""What a vendor's database does differently, as flags only: a part of the vendor's
dialect (``dialect.features``), as Django's ``DatabaseFeatures`` is a part of its
backend. The SQL that follows from a flag lives with the SQL; callers outside the store
ask these."""

from __future__ import annotations

from typing import ClassVar, Protocol


class FeaturesDialect(Protocol):
    """What the flags take from the vendor's spelling (``dialect.ops``)."""

    native_json: bool


class Features:
    """The flags of one vendor; each vendor module subclasses it to set what differs."""

    def __init__(self, dialect: FeaturesDialect) -> None:
        self.native_json = dialect.native_json

    #: Whether the JSON check accepts only an object or an array (not a bare string,
    #: number, boolean or null), so a scalar payload must be refused before the INSERT.
    json_documents_only: bool = False

    #: Whether the timestamp columns carry their zone (PostgreSQL's timestamptz); the
    #: other vendors' hold UTC wall time, with no zone to convert a bound value by.
    zoned_timestamps: ClassVar[bool] = False

    #: Whether several relays share the aggregates out by bucket (each claiming fresh
    #: rows of its own buckets); where not (SQLite: one writer), they take turns.
    shares_aggregates: ClassVar[bool] = True
