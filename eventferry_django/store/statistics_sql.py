"""The SQL with which a relay looks after the outbox's planner statistics (see
:mod:`.statistics`): a part of the vendor's dialect (``dialect.statistics``). Only
PostgreSQL's relay looks after them; elsewhere both questions answer None."""

from __future__ import annotations

from typing import Any

from .ops import SqlOps


class StatisticsSql:
    """No statistics to look after: the vendor's own (or none) serve the claim."""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    def believed_open_rows_sql(self) -> tuple[str, list[Any]] | None:
        """How many open rows the planner believes the outbox holds, as SQL and its
        parameters (one row, one number; NULL or negative when unknown); None where the
        relay does not look after the statistics."""
        return None

    def refresh_statistics_sql(self) -> str | None:
        """A statement that refreshes the outbox's planner statistics without waiting
        on anyone; None where the relay does not."""
        return None

    def forget_plans_sql(self) -> str | None:
        """A statement that drops the session's cached plans, so that the next claim is
        planned afresh; None where the relay keeps no plan of its own."""
        return None
