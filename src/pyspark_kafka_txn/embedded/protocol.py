"""Kafka wire framing for the embedded broker, on top of kio's generated entities.

kio decodes and encodes every request/response body; this module adds what a broker
needs around it: the request header, the response header (ApiVersions always uses
response header v0), cached readers/writers, and :func:`build` (from
:mod:`pyspark_kafka_txn.kio_entities`), which constructs a response entity from keyword
arguments: a field the negotiated version lacks is dropped when another version of the
entity has it (field sets differ between versions of the same API) and raises
:class:`~pyspark_kafka_txn.kio_entities.UnknownFieldError` when no version has it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from pyspark_kafka_txn.kio_entities import build, field_names

__all__ = [
    "ErrorCode",
    "ProtocolDecodeError",
    "Request",
    "build",
    "decode_request",
    "encode_response",
    "partition_entries",
    "partition_results",
    "response_module",
]

_HEADER_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class ProtocolDecodeError(Exception):
    """A frame that cannot be parsed as the request its header announces."""


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: header fields plus the kio body entity."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


# kio resolves a schema by importing its module path on every lookup; a broker looks up
# the same few (api key, version) pairs for every request, so the codecs are cached.
@cache
def _request_codec(api_key: int, version: int) -> tuple[Any, Any]:
    """Readers of the request header and body of ``api_key`` at ``version``."""
    req_cls: Any = load_request_schema(api_key, version)
    return entity_reader(req_cls.__header_schema__), entity_reader(req_cls)


@cache
def _response_codec(api_key: int, version: int) -> tuple[Any, Any, Any]:
    """Header class, header writer and body writer of the response."""
    resp_cls: Any = load_response_schema(api_key, version)
    hdr_cls = resp_cls.__header_schema__
    return hdr_cls, entity_writer(hdr_cls), entity_writer(resp_cls)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """Return kio's module holding the response classes of ``api_key`` at ``version``."""
    return load_payload_module(api_key, version, EntityType.response)


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """Return ``(api_key, api_version, correlation_id)`` without decoding the body."""
    if len(frame) < _HEADER_PREFIX.size:
        raise ProtocolDecodeError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
    return int(api_key), int(api_version), int(correlation_id)


def decode_request(frame: bytes) -> Request:
    """Decode one request frame (the bytes after the 4-byte size prefix).

    Raises
    ------
    ProtocolDecodeError
        If kio has no schema for the API version or the bytes do not parse.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    try:
        read_header, read_body = _request_codec(api_key, api_version)
        header, used = read_header(frame, 0)
        body, _ = read_body(frame, used)
    except Exception as exc:  # kio raises KeyError/ValueError/SerialError/KioIndexError
        raise ProtocolDecodeError(
            f"cannot decode api_key={api_key} v{api_version}: {exc!r}"
        ) from exc
    return Request(api_key, api_version, correlation_id, header.client_id, body)


class _Chunks:
    """A write-only buffer for kio's writers that keeps references instead of copying.

    kio's writers only call ``write`` (they accept an ``asyncio.StreamWriter``), so the
    record bytes of a Fetch response are referenced here and copied once, by the final
    join, rather than into a ``BytesIO`` and out of it again.
    """

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = [b""]  # the size prefix, filled in by ``frame``

    def write(self, data: bytes) -> None:
        self.parts.append(data)

    def frame(self) -> bytes:
        parts = self.parts
        parts[0] = _SIZE.pack(sum(map(len, parts)))
        return b"".join(parts)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """Encode a response frame, size prefix included."""
    hdr_cls, write_header, write_body = _response_codec(api_key, api_version)
    out = _Chunks()
    write_header(out, hdr_cls(correlation_id=correlation_id))
    write_body(out, body)
    return out.frame()


def partition_entries(
    topics: Iterable[Any],
    topic_cls: type[Any],
    partition_cls: type[Any],
    fields_for: Callable[[str, Any], Mapping[str, Any]],
    *,
    topic_name: str = "name",
    request_partitions: str = "partitions",
    index: str = "partition_index",
    result_partitions: str = "partitions",
) -> tuple[Any, ...]:
    """One result per requested partition, grouped by topic, in request order.

    For the APIs whose results echo the request topic by topic and partition by partition
    (ListOffsets, DeleteRecords, DescribeProducers, OffsetForLeaderEpoch, OffsetCommit,
    OffsetDelete, OffsetFetch v0-1 errors, TxnOffsetCommit, AddPartitionsToTxn v0-3).
    Each request topic gives a ``topic_cls`` with the same ``topic_name`` field; each of its
    partitions (its ``request_partitions`` field: entities with an ``index`` field, or
    bare partition numbers) a ``partition_cls`` with the same ``index`` and the fields
    ``fields_for(topic name, request partition)`` returns (called once per partition, in
    request order), listed in the topic result's ``result_partitions`` field.
    """

    def entry(name: str, p: Any) -> Any:
        number = p if isinstance(p, int) else getattr(p, index)
        return build(partition_cls, **{index: number}, **fields_for(name, p))

    def topic_result(topic: Any) -> Any:
        name = getattr(topic, topic_name)
        parts = tuple(entry(name, p) for p in getattr(topic, request_partitions))
        return build(topic_cls, **{topic_name: name, result_partitions: parts})

    return tuple(topic_result(topic) for topic in topics)


def partition_results(
    topics: Iterable[Any],
    topic_cls: type[Any],
    partition_cls: type[Any],
    code_for: Callable[[str, Any], ErrorCode],
) -> tuple[Any, ...]:
    """:func:`partition_entries` whose only field is ``error_code=code_for(topic, partition)``."""
    return partition_entries(
        topics, topic_cls, partition_cls, lambda name, p: {"error_code": code_for(name, p)}
    )


def has_field(cls: type[Any], name: str) -> bool:
    """Whether the kio entity ``cls`` has a field called ``name``."""
    return name in field_names(cls)


def response_class(api_key: int, api_version: int) -> type[Any]:
    """The kio response payload class for ``api_key`` at ``api_version``."""
    return load_response_schema(api_key, api_version)
