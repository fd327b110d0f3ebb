"""Differential conformance: one scenario of raw requests played against two clusters, and
their answers compared field by field.

A scenario is a function of a :class:`Side` (one cluster's address and bootstrap servers)
that sends kio requests through :meth:`Side.send` and records each answer under a label.
It runs against the embedded cluster and against Apache Kafka with the same topic names
and transactional ids; :func:`normalise` turns each answer into plain data without what
legitimately differs between two clusters (ports and hosts, throttle times, cluster ids,
and the values of producer ids, topic ids, node ids and timestamps, each replaced by the
order in which it first appeared, so that "the same producer id twice" still compares),
and :func:`differences` lists every field that differs.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import time
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema

from tests.support.protocol import RawClient

#: Fields dropped before comparing: where a cluster runs, and how busy it is.
DROPPED = frozenset({"host", "port", "throttle_time", "cluster_id", "rack", "controller_id"})
#: Fields whose values are replaced by the order of their first appearance, by kind (a
#: broker's id is the same kind wherever it appears).
TOKENISED = {
    "producer_id": "producer",
    "topic_id": "topic",
    "node_id": "node",
    "leader_id": "node",
    "coordinator_id": "node",
    "replica_nodes": "node",
    "isr_nodes": "node",
    "offline_replicas": "node",
}
#: Timestamps: replaced by ``"T"`` when set (a broker's clock, or when markers were written).
TIMESTAMPS = frozenset(
    {
        "timestamp",
        "log_append_time",
        "transaction_start_time_ms",
        "max_timestamp",
        "last_timestamp",
        "start_time_ms",
    }
)


def entity(cls: Any, value: dict[str, Any]) -> Any:
    """The kio entity ``cls`` built from ``value``, nested entities given as dicts."""
    hints = typing.get_type_hints(cls)
    return cls(
        **{
            f.name: _convert(hints[f.name], value[f.name])
            for f in dataclasses.fields(cls)
            if f.name in value
        }
    )


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        [hint] = [h for h in typing.get_args(hint) if h is not type(None)]
    if typing.get_origin(hint) is tuple and isinstance(value, list | tuple):
        inner = typing.get_args(hint)[0]
        return tuple(_convert(inner, v) for v in value)
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return entity(hint, value)
    return value


@dataclass
class Side:
    """One cluster of the comparison, and the answers a scenario recorded on it."""

    name: str
    bootstrap_servers: str
    answers: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.bootstrap_servers.split(",")[0].rpartition(":")
        return host, int(port)

    def send(self, api_key: int, version: int, **fields: Any) -> Any:
        """One request on a fresh connection (as another process would send it)."""
        with RawClient(self.address, client_id=f"differential-{self.name}") as client:
            return client.send(
                api_key, version, entity(load_request_schema(api_key, version), fields)
            )

    def record(self, label: str, answer: Any) -> Any:
        self.answers.append((label, answer))
        return answer

    def call(self, label: str, api_key: int, version: int, **fields: Any) -> Any:
        """:meth:`send`, recording the answer under ``label``."""
        return self.record(label, self.send(api_key, version, **fields))

    def until(
        self,
        what: str,
        api_key: int,
        version: int,
        done: Callable[[Any], bool],
        timeout_s: float = 60.0,
        **fields: Any,
    ) -> Any:
        """Send the request until ``done(answer)`` (an event the cluster reaches on its own
        schedule, e.g. markers written); return the last answer, unrecorded."""
        deadline = time.monotonic() + timeout_s
        while True:
            answer = self.send(api_key, version, **fields)
            if done(answer):
                return answer
            assert time.monotonic() < deadline, f"{self.name}: {what} not after {timeout_s} s"
            time.sleep(0.05)


def normalise(answers: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Plain data of the answers, with :data:`DROPPED`, :data:`TOKENISED` and
    :data:`TIMESTAMPS` applied (tokens numbered over the whole list)."""
    tokens: dict[tuple[str, Any], str] = {}

    def plain(key: str, value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {
                f.name: plain(f.name, getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.name not in DROPPED
            }
        if isinstance(value, tuple | list):
            return [plain(key, v) for v in value]
        if isinstance(value, enum.Enum):
            return value.name
        if isinstance(value, datetime.timedelta):
            return int(value.total_seconds() * 1000)
        if key in TIMESTAMPS or isinstance(value, datetime.datetime):
            return "T" if value not in (None, -1) else value
        if key in TOKENISED and value not in (None, -1):
            kind = TOKENISED[key]
            return tokens.setdefault((kind, value), f"{kind}#{len(tokens)}")
        if isinstance(value, bytes):
            return f"<{len(value)} bytes>"
        return value

    return [(label, plain("", answer)) for label, answer in answers]


def differences(left: Any, right: Any, path: str = "") -> Iterator[str]:
    """Every path at which two normalised answers differ, with both values."""
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            yield from differences(
                left.get(key, "<absent>"), right.get(key, "<absent>"), f"{path}.{key}"
            )
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            yield from differences(a, b, f"{path}[{i}]")
    elif left != right:
        yield f"{path}: {left!r} != {right!r}"


def compare(embedded: Side, apache: Side) -> list[str]:
    """The differences between two sides' recorded answers, step by step."""
    ours, theirs = normalise(embedded.answers), normalise(apache.answers)
    assert [label for label, _ in ours] == [label for label, _ in theirs]
    return [
        f"{label}{diff}"
        for (label, a), (_, b) in zip(ours, theirs, strict=True)
        for diff in differences(a, b)
    ]
