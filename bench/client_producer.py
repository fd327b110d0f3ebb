"""Records/s of our transactional producer (Arrow batches) vs confluent-kafka's.

Both write ``--records`` records of ``--size``-byte values (null keys) to the same topic
in transactions of ``--txn-records`` records, in the same run, alternating ``--repeat``
times. Ours produces Arrow batches of ``--arrow-rows`` rows (Spark's default
``maxRecordsPerBatch`` is 10 000); confluent-kafka calls ``produce()`` once per record.
The broker runs in a separate process (``python -m pyspark_kafka_txn broker``) unless
``--bootstrap`` points at a running cluster::

    .venv/bin/python bench/client_producer.py --records 500000

This is a benchmark, not a test: it checks only that the record counts add up.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from _common import broker_process
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer

CONFLUENT_SETTINGS = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    """Yield a bootstrap address: ``bootstrap`` or a fresh broker subprocess."""
    if bootstrap:
        yield bootstrap
        return
    with broker_process() as (address, _pid):
        yield address


def ours(bootstrap: str, topic: str, args: argparse.Namespace) -> float:
    """Seconds to write ``args.records`` with :class:`TransactionalProducer`."""
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, size=args.arrow_rows * args.size, dtype=np.uint8)
    offsets = np.arange(0, args.arrow_rows * args.size + 1, args.size, dtype=np.int32)
    values = pa.Array.from_buffers(
        pa.binary(), args.arrow_rows, [None, pa.py_buffer(offsets), pa.py_buffer(raw)]
    )
    batch = pa.RecordBatch.from_arrays([values], names=["value"])
    producer = TransactionalProducer(
        ProducerConfig(bootstrap, f"bench-ours-{uuid.uuid4().hex[:8]}", batch_size=1_000_000)
    )
    producer.init_transactions()
    start = time.perf_counter()
    left = args.records
    while left > 0:
        producer.begin_transaction()
        in_txn = min(left, args.txn_records)
        done = 0
        while done < in_txn:
            rows = min(args.arrow_rows, in_txn - done)
            producer.produce_arrow(topic, batch if rows == args.arrow_rows else batch[:rows])
            done += rows
        producer.commit_transaction()
        left -= in_txn
    elapsed = time.perf_counter() - start
    if producer.records_sent != args.records:
        raise RuntimeError(f"ours: {producer.records_sent} acknowledged, want {args.records}")
    producer.close()
    return elapsed


def confluent(bootstrap: str, topic: str, args: argparse.Namespace) -> float:
    """Seconds to write ``args.records`` with a confluent-kafka transactional loop."""
    delivered = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **CONFLUENT_SETTINGS,
            "transactional.id": f"bench-ck-{uuid.uuid4().hex[:8]}",
            "on_delivery": on_delivery,
        }
    )
    producer.init_transactions(30)
    value = bytes(np.random.default_rng(2).integers(0, 256, size=args.size, dtype=np.uint8))
    produce = producer.produce
    start = time.perf_counter()
    left = args.records
    while left > 0:
        producer.begin_transaction()
        for _ in range(min(left, args.txn_records)):
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.005)
        producer.commit_transaction(120)
        left -= min(left, args.txn_records)
    elapsed = time.perf_counter() - start
    if delivered != args.records:
        raise RuntimeError(f"confluent: {delivered} delivered, want {args.records}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--txn-records", type=int, default=100_000)
    parser.add_argument("--arrow-rows", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with broker(args.bootstrap) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = f"bench-client-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        results: dict[str, list[float]] = {"ours": [], "confluent": []}
        for _ in range(args.repeat):
            results["ours"].append(args.records / ours(bootstrap, topic, args))
            results["confluent"].append(args.records / confluent(bootstrap, topic, args))
    best = {name: max(rates) for name, rates in results.items()}
    out = sys.stdout
    out.write(
        f"{args.records} records of {args.size} B, {args.txn_records} per transaction, "
        f"{args.partitions} partitions, best of {args.repeat}\n"
    )
    for name, rates in results.items():
        out.write(
            f"  {name:10s} {best[name]:>12,.0f} rec/s   runs: "
            + ", ".join(f"{r:,.0f}" for r in rates)
            + "\n"
        )
    out.write(f"  ratio ours/confluent: {best['ours'] / best['confluent']:.2f}x\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
