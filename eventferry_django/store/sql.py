"""SQL and its parameters, travelling together.

Every fragment of the claim is a ``(sql, params)`` pair, as Django's ``as_sql`` returns,
and :func:`compose` joins fragments so that their parameters stay in the order their
placeholders appear: no parameter list is assembled by hand and no placeholder order
lives in a docstring.

The relay's statements are built once and kept (see ``Dialect.statement``), so a value
that changes from pass to pass is not in the kept parameters: a :class:`Slot` stands for
it there, named where the SQL is written, and :func:`bind` gives each slot its value
when the statement runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Fragment = tuple[str, list[Any]]


class Slot(str):
    """A parameter named in a kept statement, given its value by :func:`bind`."""

    __slots__ = ()


#: The most rows the claim hands out.
LIMIT = Slot("limit")
#: The most heads (aggregates) the claim takes.
HEADS = Slot("heads")
#: ``MAX_CHAIN``: the most rows of one aggregate in one claim.
MAX_CHAIN = Slot("max_chain")
#: The buckets whose rows the claim reads, and how many fresh rows of each.
BUCKETS = Slot("buckets")
WINDOW = Slot("window")
#: The aggregates a relay has in flight, which its claim must pass over: their rows are
#: still pending (the claim writes nothing).
IN_FLIGHT = Slot("in_flight")


def param(value: Any) -> Fragment:
    """One placeholder for ``value`` (a :class:`Slot` or a value)."""
    return "%s", [value]


def compose(template: str, *parts: Fragment) -> Fragment:
    """``template`` with its ``{}`` filled by the parts' SQL, in order; their parameters
    follow in the same order."""
    return (template.format(*(sql for sql, _ in parts)),
            [value for _, params in parts for value in params])


def bind(params: Sequence[Any], **values: Any) -> list[Any]:
    """``params`` with every :class:`Slot` replaced by its value in ``values``."""
    return [values[p] if isinstance(p, Slot) else p for p in params]


def chain_share(max_chain: int, limit: int, heads: int, rank: int) -> int:
    """How many rows may follow the ``rank``-th (1-based, in id order) of ``heads`` heads
    in a claim of ``limit`` rows: the rows the heads leave of the batch, dealt out evenly
    (the older heads take the odd ones), and never more than ``max_chain`` - 1. A hot
    aggregate alone gets the whole batch; a hundred deep ones get a slice each; and the
    shares add up to the batch, so a claim reads the rows it hands out.

    The vendors whose claim is one statement compute it in SQL for each head they
    took: :func:`chain_share_sql` spells this same formula."""
    return min(max_chain - 1, (limit - rank) // heads)


def chain_share_sql(rank: str, heads: str, *, least: bool) -> Fragment:
    """:func:`chain_share` in SQL, ``rank`` and ``heads`` being expressions for the
    head's rank and the number of heads: with ``LEAST`` (PostgreSQL), or as a ``CASE``
    (T-SQL, which has no ``LEAST`` before SQL Server 2022). Parameters:
    :data:`MAX_CHAIN`, :data:`LIMIT`."""
    if least:
        return compose(f"LEAST({{}} - 1, ({{}} - {rank}) / {heads})",
                       param(MAX_CHAIN), param(LIMIT))
    share = f"({{}} - {rank}) / {heads}"
    return compose(f"CASE WHEN {share} < {{}} - 1 THEN {share} ELSE {{}} - 1 END",
                   param(LIMIT), param(MAX_CHAIN), param(LIMIT), param(MAX_CHAIN))


def join(parts: Sequence[Fragment], separator: str) -> Fragment:
    """The parts' SQL joined by ``separator``, their parameters in the same order."""
    return (separator.join(sql for sql, _ in parts),
            [value for _, params in parts for value in params])
