"""Small helpers around independent Kafka clients used by the conformance tests."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from pyspark_kafka_txn.client.admin import TransactionDescription, describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient


def consume_messages(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    timeout_s: float = 10.0,
    **extra: Any,
) -> list[Message]:
    """Every record of ``topic`` visible at ``isolation``, read up to the end with
    librdkafka, as its messages in (partition, offset) order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **extra,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Message] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, f"did not reach the end of {topic} in time"
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, str(err)
                at_eof.add(msg.partition() or 0)
                continue
            at_eof.discard(msg.partition() or 0)
            out.append(msg)
        return sorted(out, key=lambda m: (m.partition() or 0, m.offset() or 0))
    finally:
        consumer.close()


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    timeout_s: float = 10.0,
    **extra: Any,
) -> list[tuple[int, int, bytes | None]]:
    """Read every visible record of ``topic`` up to the end: (partition, offset, value)."""
    messages = consume_messages(
        bootstrap, topic, partitions, isolation=isolation, timeout_s=timeout_s, **extra
    )
    return [(m.partition() or 0, m.offset() or 0, m.value()) for m in messages]


def watermarks(
    bootstrap: str, topic: str, partition: int, isolation: str, **extra: Any
) -> tuple[int, int]:
    """(low, high) as librdkafka's ListOffsets reports them at ``isolation`` (``extra``:
    more librdkafka settings, e.g. a secured cluster's)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation, **extra}
    )
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=10, cached=False
        )
        return int(low), int(high)
    finally:
        consumer.close()


def txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra}
    )
    producer.init_transactions(15)
    return producer


def first_address(bootstrap: str) -> tuple[str, int]:
    """``(host, port)`` of the first entry of a ``bootstrap.servers`` list."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def free_port() -> int:
    """A TCP port that was free a moment ago (for restarting a broker on the same port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_cli_broker(*args: str, timeout_s: float = 30.0) -> tuple[Any, str]:
    """Run ``python -m pyspark_kafka_txn broker ARGS`` and wait for its readiness line.

    Returns the ``subprocess.Popen`` and the bootstrap servers it printed.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyspark_kafka_txn", "broker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not lines or not lines[0].startswith("bootstrap.servers="):
        proc.kill()
        proc.wait()
        raise AssertionError(f"broker did not become ready: {lines!r}")
    return proc, lines[0].strip().split("=", 1)[1]


def stop_cli_broker(proc: Any, signum: int, timeout_s: float = 15.0) -> tuple[int, str]:
    """Signal a broker started by :func:`start_cli_broker`; its exit code and the rest of
    its stdout."""
    proc.send_signal(signum)
    try:
        code = int(proc.wait(timeout_s))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        rest = proc.stdout.read() if proc.poll() is not None else ""
        proc.stdout.close()
    return code, rest


KCAT_TIMEOUT_S = 30


def kcat_path() -> str:
    """Where kcat is; fails (never skips) when missing: ``make test`` installs it."""
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed (apt-get install kcat, or run `make test`)")
    return path


def kcat_run(kcat: str, bs: str, *args: str, stdin: str | None = None) -> str:
    """Run kcat against ``bs``; assert it succeeded; return its stdout."""
    result = subprocess.run(
        [kcat, "-b", bs, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=KCAT_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"kcat {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def kcat_consume(kcat: str, bs: str, topic: str, isolation: str) -> list[dict[str, Any]]:
    """Everything visible at ``isolation``, as kcat's JSON envelopes, by (partition, offset)."""
    out = kcat_run(
        kcat,
        bs,
        "-C",
        "-e",
        "-o",
        "beginning",
        "-J",
        "-t",
        topic,
        "-X",
        f"isolation.level={isolation}",
    )
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    return sorted(records, key=lambda r: (r["partition"], r["offset"]))


def sasl_conf(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, str]:
    """librdkafka settings of a SASL_PLAINTEXT client."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def describe_transaction(bootstrap: str, transactional_id: str) -> TransactionDescription:
    """DescribeTransactions of one id known to its coordinator, by a client of its own.

    Parameters
    ----------
    bootstrap
        The cluster's bootstrap servers.
    transactional_id
        The id; the coordinator must know it.

    Returns
    -------
    TransactionDescription
        Its state, producer id and epoch, timeout and partitions.
    """
    cluster = ClusterClient(bootstrap)
    try:
        described = describe_transactions(cluster, [transactional_id])[transactional_id]
    finally:
        cluster.close()
    assert described is not None, f"{transactional_id} is unknown to its coordinator"
    return described
