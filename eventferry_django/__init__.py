"""eventferry-django: the transactional outbox for Django.

``publish_event``, ``publish_events``, ``NewEvent`` and ``RawJSON`` are imported lazily
so that importing the package (say, from settings) does not load models before Django is
set up.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .enqueue import NewEvent, publish_event, publish_events
    from .serialization import RawJSON

__all__ = ["NewEvent", "RawJSON", "publish_event", "publish_events"]
__version__ = "0.1.0"


#: Where each public name lives.
_MODULES = {"NewEvent": "enqueue", "publish_event": "enqueue",
            "publish_events": "enqueue", "RawJSON": "serialization"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(import_module(f".{_MODULES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
