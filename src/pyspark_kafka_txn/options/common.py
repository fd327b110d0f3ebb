"""What every option parser shares: the case-insensitive view, value parsers, secrets.

PySpark 4.3 hands a Python data source its option names lower-cased (``read``,
``readStream``, ``write`` and ``writeStream`` alike); other callers (tests, the driver-side
helpers) may keep the user's case. :class:`OptionView` looks names up case-insensitively
and remembers the spelling it was given, so an error names the option as closely as it can
(through Spark, in lower case). Parsers take
the view and the option's canonical name; none of them does I/O or imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.values import InvalidValueError, Parser, RefusedValueError

__all__ = [
    "KAFKA_PREFIX",
    "OptionView",
    "is_secret",
    "redact",
    "redacted_repr",
]

KAFKA_PREFIX = "kafka."

_REDACTED = "*********(redacted)"
_SECRET_MARKERS = ("password", "secret", "jaas", "token", "credential")


def is_secret(key: str) -> bool:
    """Whether a (Kafka) option's value must never be shown.

    Parameters
    ----------
    key
        An option name, with or without the ``kafka.`` prefix.

    Returns
    -------
    bool
        True for SASL settings other than the mechanism, and for anything that looks like
        a password, key, token or credential.
    """
    k = key.lower().removeprefix(KAFKA_PREFIX)
    if k.startswith("sasl.") and k not in {"sasl.mechanism", "sasl.mechanisms"}:
        return True
    if k in {"ssl.key.pem", "ssl.certificate.pem", "ssl_key"}:
        return True
    return any(m in k for m in _SECRET_MARKERS)


def redact(params: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``params`` with every secret value replaced.

    Parameters
    ----------
    params
        Option names to values.

    Returns
    -------
    dict
        The same keys; secret values replaced by a fixed marker.
    """
    return {k: (_REDACTED if is_secret(k) else v) for k, v in params.items()}


def redacted_repr(options: Any, secret_field: str) -> str:
    """``Class(field=value, ...)`` of an options dataclass, ``secret_field`` redacted.

    ``secret_field`` holds the Kafka client settings (SASL passwords among them); every
    other field is shown as its ``repr``.
    """
    shown = ", ".join(
        f"{name}={redact(value) if name == secret_field else value!r}"
        for name, value in ((name, getattr(options, name)) for name in options.__dataclass_fields__)
    )
    return f"{type(options).__name__}({shown})"


class OptionView(Mapping[str, str]):
    """Read-only, case-insensitive view of the options a user gave.

    Parameters
    ----------
    options
        The options as Spark passes them.

    Examples
    --------
    >>> view = OptionView({"Kafka.Bootstrap.Servers": "h:9092"})
    >>> view["kafka.bootstrap.servers"], view.spelled("kafka.bootstrap.servers")
    ('h:9092', 'Kafka.Bootstrap.Servers')
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self._values = {k.lower(): v for k, v in options.items()}
        self._spelling = {k.lower(): k for k in options}

    def __getitem__(self, key: str) -> str:
        return self._values[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._values

    def spelled(self, name: str) -> str:
        """The option's name as the user wrote it (``name`` itself when not given)."""
        return self._spelling.get(name.lower(), name)

    def kafka(self) -> dict[str, str]:
        """The ``kafka.*`` options with the prefix removed (keys lower-cased)."""
        return {
            k.removeprefix(KAFKA_PREFIX): v
            for k, v in self._values.items()
            if k.startswith(KAFKA_PREFIX)
        }

    # -- values ------------------------------------------------------------------------

    def parse(self, name: str, parser: Parser, default: str | None = None) -> Any:
        """The value of option ``name`` parsed by ``parser`` (``default`` when not given).

        Parameters
        ----------
        name
            The option's documented name.
        parser
            A value parser of :mod:`~pyspark_kafka_txn.options.values`.
        default
            The text to parse when the option is not given; None: the value is None.

        Raises
        ------
        ConfigError
            ``Invalid value 'x' for option 'y', must be …``, naming the option as the user
            spelt it; a secret's value, or a very long one, is not shown in full. A
            :class:`~pyspark_kafka_txn.options.values.RefusedValueError` keeps its own
            sentence (Spark's), naming the option as documented.
        """
        text = self.get(name, default)
        if text is None:
            return None
        try:
            return parser(text)
        except RefusedValueError as exc:
            raise ConfigError(exc.naming(name)) from None
        except InvalidValueError as exc:
            if is_secret(name):
                shown = "(redacted)"
            elif len(text) > _SHOWN_CHARS:
                shown = f"'{text[:_SHOWN_CHARS]}…'"
            else:
                shown = f"'{text}'"
            raise ConfigError(
                f"Invalid value {shown} for option '{self.spelled(name)}', {exc}"
            ) from None


#: The longest value an error shows in full.
_SHOWN_CHARS = 80
