"""Value parsers of the option registry: text as the user wrote it → the value used.

Each parser is a small frozen object that can be called with the text of an option and
returns the parsed value, or raises :class:`InvalidValueError` whose message says what the value
must be (``must be a positive integer``). The message that names the option is built by
:meth:`pyspark_kafka_txn.options.common.OptionView.parse`, the one place that knows how the
user spelt the name and whether the value is a secret. A parser that keeps Spark's own
wording (the subscription and offsets options of
:mod:`~pyspark_kafka_txn.options.specs`) raises :class:`RefusedValueError`, which writes the
whole message around the option's documented name. No I/O, no pyspark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "BOOLEAN",
    "DURATION",
    "NON_NEGATIVE",
    "POSITIVE",
    "TEXT",
    "Choice",
    "Duration",
    "Integer",
    "InvalidValueError",
    "Parser",
    "RefusedValueError",
    "Text",
    "choice",
]


class InvalidValueError(ValueError):
    """A value a parser refuses; the message completes ``Invalid value 'x' for option 'y', …``.

    Internal to the options package: :meth:`OptionView.parse` turns it into the package's
    :class:`~pyspark_kafka_txn.errors.ConfigError`, which names the option.
    """


class RefusedValueError(InvalidValueError):
    """A refusal worded as a whole sentence (Spark's wording) around the option's name.

    Parameters
    ----------
    before, after
        The sentence before and after the option's quoted name.

    Examples
    --------
    >>> RefusedValueError("Option ", " is empty").naming("subscribe")
    "Option 'subscribe' is empty"
    """

    def __init__(self, before: str, after: str) -> None:
        super().__init__(f"{before}'…'{after}")
        self.before = before
        self.after = after

    def naming(self, option: str) -> str:
        """The sentence, naming ``option``."""
        return f"{self.before}'{option}'{self.after}"


class Parser(Protocol):
    """What a registry row calls to parse its option's text."""

    def __call__(self, text: str) -> Any:
        """The parsed value of ``text``; raises :class:`InvalidValueError`."""
        ...


@dataclass(frozen=True, slots=True)
class Integer:
    """A whole number of at least ``minimum`` (0 or 1)."""

    minimum: int

    def __call__(self, text: str) -> int:
        """Parse ``text`` (surrounding blanks allowed)."""
        try:
            value = int(text.strip())
        except ValueError:
            raise InvalidValueError(self.must) from None
        if value < self.minimum:
            raise InvalidValueError(self.must)
        return value

    @property
    def must(self) -> str:
        """What the value must be, as the error says it."""
        kind = "positive" if self.minimum > 0 else "non-negative"
        return f"must be a {kind} integer"


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a few words (matched case-insensitively), each standing for a value."""

    values: Mapping[str, object]

    def __call__(self, text: str) -> object:
        """The value of the word ``text`` names."""
        word = text.strip().lower()
        if word not in self.values:
            raise InvalidValueError("must be " + " or ".join(self.values))
        return self.values[word]


def choice(*words: str) -> Choice:
    """A :class:`Choice` whose words stand for themselves (lower-case)."""
    return Choice({word: word for word in words})


_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


@dataclass(frozen=True, slots=True)
class Duration:
    """A Spark time string (``15m``, ``30s``, ``500ms``; a bare number is ms) → ms."""

    def __call__(self, text: str) -> int:
        """Milliseconds of ``text``."""
        match = _DURATION.match(text)
        if match is None:
            raise InvalidValueError("must be a duration such as '15m', '30s' or '500ms'")
        return int(int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()])


@dataclass(frozen=True, slots=True)
class Text:
    """Non-blank text, stripped; optionally of given characters and length.

    Attributes
    ----------
    pattern
        A regular expression the whole text must match, or None.
    pattern_must
        What the error says when it does not (``must contain only …``).
    max_length
        The longest text accepted, or None.
    why_max
        Why the limit exists (appended to the error).
    strip
        Remove surrounding blanks first (names, servers); False keeps the text as given.
    """

    pattern: str | None = None
    pattern_must: str = ""
    max_length: int | None = None
    why_max: str = ""
    strip: bool = True

    def __call__(self, text: str) -> str:
        """``text`` checked (and stripped)."""
        value = text.strip() if self.strip else text
        if not value.strip():
            raise InvalidValueError("must not be empty")
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            raise InvalidValueError(self.pattern_must)
        if self.max_length is not None and len(value) > self.max_length:
            raise InvalidValueError(
                f"must be at most {self.max_length} characters long (is {len(value)}){self.why_max}"
            )
        return value


POSITIVE = Integer(1)
NON_NEGATIVE = Integer(0)
BOOLEAN = Choice({"true": True, "false": False})
DURATION = Duration()
TEXT = Text()
