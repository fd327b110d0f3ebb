"""Fault injection rules for chaos tests.

A rule matches requests by API key (and optionally broker node, and the prefix of the
request's ``transactional_id``, or of its ``group_id`` for a request without one, such as
OffsetCommit, so a test can aim at one application among several) and
does one thing to the next ``count`` matching requests:

* ``error``: answer with ``error`` without executing the request (the API needs an
  error response builder, ``ApiSpec.error_response``, built next to its handler, see
  :mod:`pyspark_kafka_txn.embedded.handlers`);
* ``error_after``: execute the request, then answer with ``error`` in every error-code
  field of the real response (a lost acknowledgement);
* ``delay``: wait ``delay_s`` before executing;
* ``drop``: close the connection without executing;
* ``drop_after``: execute, then close the connection without answering.

A Produce with ``acks=0`` has no answer to carry an error, so both error actions close
its connection instead, as Kafka does when such a produce fails. Broker-level faults
(dropping every connection, moving a leader or coordinator, stopping a broker) are
methods of :class:`~pyspark_kafka_txn.embedded.EmbeddedKafka`.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any

from pyspark_kafka_txn.embedded.protocol import ErrorCode


class FaultAction(enum.Enum):
    """What a fault rule does to a matching request."""

    ERROR = "error"
    ERROR_AFTER = "error_after"
    DELAY = "delay"
    DROP = "drop"
    DROP_AFTER = "drop_after"


@dataclass(slots=True)
class FaultRule:
    """One armed fault."""

    action: FaultAction
    api_key: int | None
    node: int | None = None
    error: ErrorCode = ErrorCode.none
    delay_s: float = 0.0
    remaining: int = 1
    hits: int = 0
    #: Only requests whose ``transactional_id`` (or, without one, ``group_id``) starts
    #: with this (``None``: any request).
    transactional_id_prefix: str | None = None

    def matches(self, api_key: int, node: int, body: Any) -> bool:
        """Whether this rule applies to a request ``body`` of ``api_key`` on ``node``."""
        if self.api_key not in (None, api_key) or self.node not in (None, node):
            return False
        if self.transactional_id_prefix is None:
            return True
        tid = getattr(body, "transactional_id", None)
        if tid is None:
            tid = getattr(body, "group_id", None)
        return isinstance(tid, str) and tid.startswith(self.transactional_id_prefix)


class Faults:
    """The armed rules; safe to arm from any thread."""

    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()

    def add(self, rule: FaultRule) -> FaultRule:
        if rule.action in (FaultAction.ERROR, FaultAction.ERROR_AFTER) and (
            rule.error is ErrorCode.none
        ):
            raise ValueError(f"fault action {rule.action.value} needs an error code")
        if rule.remaining <= 0:
            raise ValueError(f"fault count must be positive, got {rule.remaining}")
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, api_key: int, node: int, body: Any) -> FaultRule | None:
        """Consume one use of the first rule matching this request, if any."""
        if not self._rules:
            return None
        with self._lock:
            for rule in self._rules:
                if not rule.matches(api_key, node, body):
                    continue
                rule.remaining -= 1
                rule.hits += 1
                if rule.remaining == 0:
                    self._rules.remove(rule)
                return rule
        return None

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
