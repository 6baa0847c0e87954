"""eventferry-django: the transactional outbox for Django.

``publish_event`` and ``publish_events`` are imported lazily so that importing the
package (say, from settings) does not load models before Django is set up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .publishing import NewEvent, publish_event, publish_events

__all__ = ["NewEvent", "publish_event", "publish_events"]
__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import publishing

        return getattr(publishing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
