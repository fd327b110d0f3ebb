"""Helpers for the client tests: full-record readers with independent clients."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def read_records(
    bootstrap: str, topic: str, partitions: int, *, isolation: str, timeout_s: float = 10.0
) -> list[Row]:
    """Every visible record via librdkafka, in (partition, offset) order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[int, int, Row]] = []
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
                at_eof.add(msg.partition())
                continue
            at_eof.discard(msg.partition())
            hdrs = tuple((k, v) for k, v in (msg.headers() or []))
            row = (msg.partition(), msg.key(), msg.value(), hdrs)
            out.append((msg.partition(), msg.offset(), row))
        return [row for _, _, row in sorted(out, key=lambda t: (t[0], t[1]))]
    finally:
        consumer.close()


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
