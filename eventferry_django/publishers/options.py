"""Publisher OPTIONS, declared once: a table of :class:`Option` per publisher, one checker.

A publisher lists its OPTIONS as :class:`Option` rows in an :class:`OptionTable`; the
table answers ``check()`` (unknown names, missing required values, refused values, each
with its own check id) and supplies the defaults the constructor starts from. Every
refused value is reported in one shape::

    KombuPublisher OPTIONS['exchange'] is 7: must be a string of at most 255 bytes.

so the kombu and Celery publishers cannot drift apart in how they say it.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.checks import CheckMessage, Error

from ..exceptions import ConfigurationError
from .base import mask_url

if TYPE_CHECKING:
    from .base import Publisher

#: Why a value cannot be this option (a phrase completing "OPTIONS['x'] is value: ..."),
#: or None when it can.
Problem = Callable[[Any], "str | None"]


def accepted(value: object) -> str | None:
    """Any value will do."""
    return None


def positive_seconds(value: object) -> str | None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value) > 0:
        return None
    return "must be a positive number of seconds"


def boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else "must be True or False"


def positive_int_or_none(value: object) -> str | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return None
    return "must be a positive integer or None"


def is_name(value: object) -> bool:
    """A non-blank string."""
    return isinstance(value, str) and bool(value.strip())


def blank(value: object) -> bool:
    """None or a string of nothing but whitespace: an option not really given."""
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass(frozen=True)
class Option:
    """One OPTIONS key of a publisher: its default and what it refuses, under which id."""

    name: str
    #: The id of the check a refused value raises.
    check_id: str
    problem: Problem = accepted
    default: Any = None
    #: When set, a blank value (None, "  ") is refused with this phrase under
    #: ``required_id``, before ``problem`` is asked.
    required: str | None = None
    required_id: str | None = None
    #: The value is a broker URL: its password is masked in messages.
    is_url: bool = False
    #: How the value is shown in messages, when it may hold secrets of another shape.
    mask: Callable[[Any], Any] | None = None

    def check(self, publisher: str, options: Mapping[str, Any]) -> list[CheckMessage]:
        value = options.get(self.name, self.default)
        if self.required is not None and blank(value):
            return [self.error(publisher, value, self.required, self.required_id)]
        problem = self.problem(value)
        if problem is None:
            return []
        return [self.error(publisher, value, problem, self.check_id)]

    def error(self, publisher: str, value: object, problem: str, check_id: str | None = None
              ) -> Error:
        """The one shape of a refused value's message."""
        if self.is_url and isinstance(value, str):
            value = mask_url(value)
        elif self.is_url and isinstance(value, list | tuple):  # several brokers' URLs
            value = [mask_url(v) if isinstance(v, str) else v for v in value]
        if self.mask is not None:
            value = self.mask(value)
        return Error(
            f"{publisher} OPTIONS[{self.name!r}] is {value!r}: {problem}.",
            hint=f"See the {publisher} docstring for the accepted OPTIONS.",
            id=check_id or self.check_id,
        )


@dataclass(frozen=True)
class OptionTable:
    """Every OPTION a publisher takes, and the id of the check naming any other."""

    options: tuple[Option, ...]
    unknown_id: str

    @property
    def names(self) -> list[str]:
        return [option.name for option in self.options]

    def __getitem__(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        return {option.name: option.default for option in self.options}

    def check(self, publisher: type[Publisher], options: Mapping[str, Any]
              ) -> list[CheckMessage]:
        """Unknown names first, then each option in the table's order."""
        messages = publisher.unknown_options(options, self.names, self.unknown_id)
        for option in self.options:
            messages += option.check(publisher.__name__, options)
        return messages


def raise_if_serious(messages: list[CheckMessage]) -> None:
    """A constructor's guard: the errors ``check()`` found, as one
    :class:`ConfigurationError`."""
    errors = [m for m in messages if m.is_serious()]
    if errors:
        raise ConfigurationError(" ".join(str(m.msg) for m in errors))
