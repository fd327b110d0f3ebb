"""The raw protocol client: kio entities over a plain socket, for what real clients hide
(which error a given node answers, a byte-exact retry of a stored batch, a JoinGroup left
parked, a request from a SASL-authenticated principal)."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import io
import socket
import struct
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import request as offset_fetch_v7
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from pyspark_kafka_txn.wire import SASL_AUTHENTICATE, SASL_HANDSHAKE
from tests.support.hang import HANG_S


def request_module(api_key: int, version: int) -> ModuleType:
    """kio's module of the request entities of ``api_key`` at ``version``."""
    return load_payload_module(api_key, version, EntityType.request)


class RawClient:
    """One Kafka connection speaking kio entities, one request at a time.

    ``sasl_plain=(user, password)`` authenticates the connection first (SaslHandshake v1,
    SaslAuthenticate v2). :meth:`call` blocks; :meth:`acall` runs it in a thread, so that
    a test can keep requests of several connections in flight (JoinGroups parked until a
    rebalance completes).
    """

    def __init__(
        self,
        address: tuple[str, int],
        *,
        sasl_plain: tuple[str, str] | None = None,
        client_id: str = "raw-test",
        timeout_s: float = HANG_S,
    ) -> None:
        self.sock = socket.create_connection(address, timeout_s)
        self.client_id = client_id
        self.correlation = 0
        if sasl_plain is not None:
            user, password = sasl_plain
            handshake = self.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
            assert handshake.error_code is ErrorCode.none, handshake
            token = b"\0" + user.encode() + b"\0" + password.encode()
            auth = self.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
            assert auth.error_code is ErrorCode.none, auth

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """Send the request entity built from ``fields``; return the response entity."""
        req_cls: Any = load_request_schema(api_key, version)
        return self.send(api_key, version, req_cls(**fields))

    async def acall(self, api_key: int, version: int, **fields: Any) -> Any:
        """:meth:`call` in a thread of the running loop's executor."""
        return await asyncio.to_thread(self.call, api_key, version, **fields)

    def send(self, api_key: int, version: int, body: Any) -> Any:
        """Send ``body``, a kio request entity of ``api_key`` at ``version``; return the
        decoded response entity."""
        req_cls: Any = load_request_schema(api_key, version)
        hdr_cls: Any = req_cls.__header_schema__
        self.correlation += 1
        buf = io.BytesIO()
        entity_writer(hdr_cls)(
            buf,
            hdr_cls(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=self.correlation,
                client_id=self.client_id,
            ),
        )
        entity_writer(req_cls)(buf, body)
        frame = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        resp_cls: Any = load_response_schema(api_key, version)
        header, used = entity_reader(resp_cls.__header_schema__)(data, 0)
        assert header.correlation_id == self.correlation
        response, _ = entity_reader(resp_cls)(data, used)
        return response

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "connection closed before a response arrived"
            data += chunk
        return data


def raw_request(address: tuple[str, int], api_key: int, version: int, body: Any) -> Any:
    """Send one request over a fresh connection and return the decoded response body.

    ``body`` is a kio request entity of ``api_key`` at ``version``.
    """
    with RawClient(address) as client:
        return client.send(api_key, version, body)


def raw_produce(
    address: tuple[str, int],
    topic: str,
    partition: int,
    records: bytes,
    *,
    version: int = 9,
    acks: int = -1,
) -> Any:
    """One Produce request of ``records`` (one partition, non-transactional) sent by
    :func:`raw_request`; returns the partition's response entry."""
    mod: Any = importlib.import_module(f"kio.schema.produce.v{version}.request")
    body = mod.ProduceRequest(
        transactional_id=None,
        acks=mod.i16(acks),
        timeout=mod.i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(
            mod.TopicProduceData(
                name=mod.TopicName(topic),
                partition_data=(
                    mod.PartitionProduceData(index=mod.i32(partition), records=records),
                ),
            ),
        ),
    )
    return raw_request(address, 0, version, body).responses[0].partition_responses[0]


def stable_offset_fetch_error(bootstrap_servers: str, group: str, topic: str) -> ErrorCode:
    """Partition 0's error in a raw OffsetFetch v7 with RequireStable, from the group's
    coordinator (every other broker answers NOT_COORDINATOR)."""
    codes = []
    for address in bootstrap_servers.split(","):
        host, port = address.rsplit(":", 1)
        answer = raw_request(
            (host, int(port)),
            9,
            7,
            offset_fetch_v7.OffsetFetchRequest(
                group_id=offset_fetch_v7.GroupId(group),
                topics=(
                    offset_fetch_v7.OffsetFetchRequestTopic(
                        name=offset_fetch_v7.TopicName(topic),
                        partition_indexes=(offset_fetch_v7.i32(0),),
                    ),
                ),
                require_stable=True,
            ),
        )
        if answer.error_code is not ErrorCode.not_coordinator:
            codes.append(answer.topics[0].partitions[0].error_code)
    assert len(codes) == 1, codes
    return ErrorCode(codes[0])
