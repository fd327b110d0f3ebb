"""The listener under churn: stopping or restarting brokers while clients connect.

A broker that stops must close every connection it accepted, including those it accepted
a moment before and had not started serving yet; otherwise their sockets are left to the
garbage collector ("unclosed socket/transport" ResourceWarnings, file descriptors held
until then). Found by the chaos harness, whose cluster restarts while Spark's, the
writer's and librdkafka's clients reconnect.
"""

from __future__ import annotations

import gc
import socket
import struct
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.clusters import CheckedKafka

HANG_S = 60.0  # hang detector, never a timing assertion
#: An ApiVersions v0 request, correlation id 1, client id "churn".
_API_VERSIONS = struct.pack(">hhih", 18, 0, 1, 5) + b"churn"
_FRAME = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS


@contextmanager
def _unraisable() -> Iterator[list[str]]:
    """Collect what ``__del__`` methods report (unclosed sockets, transports)."""
    seen: list[str] = []
    previous = sys.unraisablehook

    def hook(info: Any) -> None:
        seen.append(f"{info.exc_type.__name__}: {info.exc_value} ({info.object!r})")

    sys.unraisablehook = hook
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)  # __del__ warnings → the hook
            yield seen
            gc.collect()
    finally:
        sys.unraisablehook = previous


def _hammer(addresses: list[tuple[str, int]], stop: threading.Event, counts: list[int]) -> None:
    """Open connections as fast as possible; some send a request, all close at once."""
    n = 0
    while not stop.is_set():
        host, port = addresses[n % len(addresses)]
        n += 1
        try:
            with socket.create_connection((host, port), timeout=2) as sock:
                if n % 2:
                    sock.sendall(_FRAME)
            counts[0] += 1
        except OSError:
            time.sleep(0.001)  # the broker is down for a moment


@pytest.mark.parametrize("brokers", [1, 3])
def test_restarts_while_clients_connect_leave_no_socket_behind(
    brokers: int, tmp_path: Path
) -> None:
    with _unraisable() as leaks:
        kafka = CheckedKafka(brokers=brokers, data_dir=tmp_path / "data")
        with kafka:
            addresses = [
                (host, int(port))
                for host, port in (a.rsplit(":", 1) for a in kafka.bootstrap_servers.split(","))
            ]
            stop, counts = threading.Event(), [0]
            threads = [
                threading.Thread(target=_hammer, args=(addresses, stop, counts), daemon=True)
                for _ in range(3)
            ]
            for t in threads:
                t.start()
            try:
                deadline = time.monotonic() + HANG_S
                while counts[0] < 50:  # the clients are connecting
                    assert time.monotonic() < deadline, "no client ever connected"
                    time.sleep(0.01)
                for _ in range(8):
                    kafka.restart()
                    kafka.drop_connections()
            finally:
                stop.set()
                for t in threads:
                    t.join(HANG_S)
            # Still a working cluster: a real client gets metadata and offsets.
            kafka.create_topic("after-churn", 1)
            consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "c"})
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition("after-churn", 0), 30)
            finally:
                consumer.close()
            assert (low, high) == (0, 0)
        assert counts[0] >= 50
        del kafka
    assert leaks == [], f"{len(leaks)} objects left to the garbage collector: {leaks[:5]}"


def test_accepted_connections_have_nagle_disabled() -> None:
    """Pipelined answers (e.g. a driver's EndTxns) are sent at once, not ~40 ms later."""
    with CheckedKafka() as kafka:
        host, port = kafka.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(_FRAME)
            (size,) = struct.unpack(">i", client.recv(4))
            assert size > 0  # answered: the connection is being served

            def nodelay() -> list[int]:
                return [
                    t.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                    for server in kafka._servers.values()
                    for t in server._transports
                ]

            flags = kafka.call(lambda _: nodelay())
        assert flags and all(flags), flags
