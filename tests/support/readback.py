"""Helpers for the client tests: full-record readers with independent clients, and a
producer that prepares a transaction in another process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any, cast

from confluent_kafka import Message

from pyspark_kafka_txn.client.producer import PreparedTransaction
from tests.support.clients import consume_messages
from tests.support.hang import HANG_S

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def _headers(message: Message) -> list[tuple[str, bytes | None]]:
    """A librdkafka message's headers (its stubs also allow a dict, never returned here)."""
    return cast("list[tuple[str, bytes | None]]", message.headers() or [])


def read_records(
    bootstrap: str, topic: str, partitions: int, *, isolation: str, timeout_s: float = 10.0
) -> list[Row]:
    """Every visible record via librdkafka, in (partition, offset) order."""
    messages = consume_messages(
        bootstrap, topic, partitions, isolation=isolation, timeout_s=timeout_s
    )
    return [(m.partition() or 0, m.key(), m.value(), tuple(_headers(m))) for m in messages]


def read_records_aiokafka(
    bootstrap: str, topic: str, partitions: int, *, isolation: str, timeout_s: float = 10.0
) -> list[Row]:
    """Every visible record via aiokafka, in (partition, offset) order."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def run() -> list[Row]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
        )
        await consumer.start()
        try:
            tps = [AioTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends: dict[Any, int] = await consumer.end_offsets(tps)
            out: list[tuple[int, int, Row]] = []
            deadline = time.monotonic() + timeout_s

            async def behind() -> bool:
                return any([await consumer.position(tp) < ends[tp] for tp in tps])

            while await behind():
                assert time.monotonic() < deadline, "aiokafka did not reach the end in time"
                got = await consumer.getmany(timeout_ms=200)
                for tp, msgs in got.items():
                    for m in msgs:
                        hdrs = tuple((k, v) for k, v in m.headers)
                        out.append((tp.partition, m.offset, (tp.partition, m.key, m.value, hdrs)))
            return [row for _, _, row in sorted(out, key=lambda t: (t[0], t[1]))]
        finally:
            await consumer.stop()

    return asyncio.run(run())


_PREPARE_SCRIPT = """
import json, sys
import pyarrow as pa
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
options, topic, tag, count = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
producer = TransactionalProducer(ProducerConfig.from_options(options))
producer.init_transactions()
producer.begin_transaction()
producer.produce(topic, pa.array([f"{tag}-{i}".encode() for i in range(count)]), partitions=0)
handle = producer.prepare()
producer.close()
sys.stdout.write(json.dumps([handle.transactional_id, handle.producer_id,
                             handle.producer_epoch, handle.transaction_version,
                             producer.two_phase_commit]))
"""


def prepare_in_subprocess(
    options: Mapping[str, str | int], topic: str, tag: str, count: int = 10
) -> tuple[PreparedTransaction, bool]:
    """Our producer, in another OS process: ``count`` records ``{tag}-{i}`` to partition 0
    in a transaction left prepared (not ended). Returns its handle and whether KIP-939
    two-phase commit was in effect."""
    out = subprocess.run(
        [sys.executable, "-c", _PREPARE_SCRIPT, json.dumps(dict(options)), topic, tag, str(count)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    tid, pid, epoch, version, two_phase = json.loads(out.stdout)
    return PreparedTransaction(tid, pid, epoch, version), two_phase


def wait_for_values(
    bootstrap: str, topic: str, want: list[bytes], timeout_s: float = HANG_S
) -> None:
    """Wait until partition 0 of ``topic`` shows exactly ``want`` to read_committed readers
    (markers are written after EndTxn is answered, so visibility lags a little)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = [r[2] for r in read_records(bootstrap, topic, 1, isolation="read_committed")]
        if got == want:
            return
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
