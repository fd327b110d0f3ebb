"""Throughput of the embedded broker as confluent-kafka (librdkafka) sees it.

Produces ``--records`` records of ``--size`` bytes with an idempotent producer
(``acks=all``) and with a transactional producer, then reads each topic back with a
``read_committed`` consumer, and prints MB/s (10^6 bytes of record values per second),
msg/s and the CPU time the broker spent in each phase.

The broker runs either as a separate process (``python -m pyspark_kafka_txn broker
--port 0``, the fair setting: broker and client do not share a GIL) or in this process
(``EmbeddedKafka``, as tests and notebooks use it), or both, one after the other::

    .venv/bin/python bench/broker_throughput.py --records 200000 --size 1024 --broker both
    .venv/bin/python bench/broker_throughput.py --repeat 3 --plot broker-throughput.png

This is a benchmark, not a test: it asserts only that every record comes back.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from _common import FAST_CONSUMER_SETTINGS, broker_process
from _plot import FIGSIZE, pyplot, save

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_START_TIMEOUT_S = 60.0
# Receives the one record that makes an idempotent producer fetch its id off the clock.
PRIME_TOPIC = "bench-prime"
#: The goal for producing and for fetching 1 KiB records (bench/README.md).
TARGET_MB_S = 100.0

# Settings a user who cares about throughput would pick; printed with the results.
PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_000_000,  # bytes per partition batch (librdkafka's default)
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}
CONSUMER_SETTINGS = FAST_CONSUMER_SETTINGS


@dataclass(frozen=True, slots=True)
class Options:
    """Command-line options."""

    records: int
    size: int
    partitions: int
    txn_records: int
    broker: str
    repeat: int
    bootstrap: str | None
    broker_pid: int | None
    plot: str | None


@dataclass(frozen=True, slots=True)
class Phase:
    """One measured phase."""

    broker_mode: str
    name: str
    records: int
    payload_bytes: int
    seconds: float
    broker_cpu_s: float | None
    client_cpu_s: float

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.seconds / 1e6

    @property
    def msg_per_s(self) -> float:
        return self.records / self.seconds


def _proc_cpu_seconds(stat_path: str) -> float | None:
    """utime + stime of a process or thread from ``/proc`` (Linux), else ``None``."""
    try:
        with open(stat_path) as fh:
            text = fh.read()
    except OSError:
        return None
    # The command name may contain spaces; the fields after it are space separated.
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(slots=True)
class Broker:
    """A running broker: where to connect and how to read its CPU time."""

    mode: str
    bootstrap: str
    cpu: Callable[[], float | None]


@contextlib.contextmanager
def external_broker(bootstrap: str, pid: int | None) -> Iterator[Broker]:
    """An already running broker at ``bootstrap`` (CPU time only if ``pid`` is known)."""
    yield Broker(
        "external",
        bootstrap,
        lambda: None if pid is None else _proc_cpu_seconds(f"/proc/{pid}/stat"),
    )


@contextlib.contextmanager
def subprocess_broker() -> Iterator[Broker]:
    """Run ``python -m pyspark_kafka_txn broker --port 0`` and yield it."""
    with broker_process() as (bootstrap, pid):
        yield Broker("subprocess", bootstrap, lambda: _proc_cpu_seconds(f"/proc/{pid}/stat"))


@contextlib.contextmanager
def in_process_broker() -> Iterator[Broker]:
    """Run ``EmbeddedKafka`` on a thread of this process and yield it."""
    from pyspark_kafka_txn.embedded import EmbeddedKafka

    with EmbeddedKafka() as kafka:
        tid = kafka.call(lambda _cluster: threading.get_native_id())
        yield Broker(
            "in-process",
            kafka.bootstrap_servers,
            lambda: _proc_cpu_seconds(f"/proc/self/task/{tid}/stat"),
        )


def _create_topic(
    admin: AdminClient, name: str, partitions: int, *, exist_ok: bool = False
) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
    for future in futures.values():
        try:
            future.result(timeout=_START_TIMEOUT_S)
        except KafkaException as exc:
            if not (exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise


def _delete_topic(admin: AdminClient, name: str) -> None:
    for future in admin.delete_topics([name], operation_timeout=30).values():
        future.result(timeout=_START_TIMEOUT_S)


class _DeliveryCheck:
    """Counts delivery reports and remembers the first error."""

    def __init__(self) -> None:
        self.delivered = 0
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            if self.error is None:
                self.error = err
        else:
            self.delivered += 1


def _produce_loop(producer: Producer, topic: str, value: bytes, count: int) -> None:
    produce = producer.produce
    for _ in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                producer.poll(0.005)


def ready_producer(bootstrap: str, check: _DeliveryCheck, *, transactional: bool) -> Producer:
    """A producer that already holds its producer id, so the clock measures throughput.

    librdkafka asks for a producer id only once a record is queued, and after it retires
    the bootstrap connection it retries on a 500 ms timer: the first record of an
    idempotent producer takes about half a second whatever the broker (the broker
    answers InitProducerId in milliseconds). That start-up is kept off the clock.
    """
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
        producer = Producer({**config, "on_delivery": check})
        producer.init_transactions(30)
        return producer
    producer = Producer({**config, "on_delivery": check})
    producer.produce(PRIME_TOPIC, b"")
    if producer.flush(30) or check.error is not None:
        raise RuntimeError(f"could not prime the idempotent producer: {check.error}")
    check.delivered = 0
    return producer


def produce_all(
    producer: Producer,
    check: _DeliveryCheck,
    topic: str,
    opts: Options,
    value: bytes,
    *,
    transactional: bool,
) -> int:
    """Produce ``opts.records`` records and wait for every acknowledgement.

    A transactional producer commits every ``opts.txn_records`` records. Returns the
    value bytes acknowledged.
    """
    if transactional:
        left = opts.records
        while left > 0:
            count = min(left, opts.txn_records)
            producer.begin_transaction()
            _produce_loop(producer, topic, value, count)
            producer.commit_transaction(120)
            left -= count
    else:
        _produce_loop(producer, topic, value, opts.records)
        producer.flush(120)
    if check.error is not None or check.delivered != opts.records:
        raise RuntimeError(f"produce: {check.delivered} delivered, error {check.error}")
    return opts.records * len(value)


def consume(bootstrap: str, topic: str, opts: Options) -> int:
    """Read ``opts.records`` records from the start; return the value bytes read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            **CONSUMER_SETTINGS,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(opts.partitions)])
        count = 0
        total = 0
        deadline = time.monotonic() + 300
        while count < opts.records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read only {count} of {opts.records} records")
            for msg in consumer.consume(10_000, 0.5):
                err = msg.error()
                if err is not None:
                    raise KafkaException(err)
                total += len(msg.value() or b"")
                count += 1
        if count != opts.records or total != opts.records * opts.size:
            raise RuntimeError(
                f"read {count} records ({total} bytes), expected {opts.records} of {opts.size} B"
            )
        return total
    finally:
        consumer.close()


def _measure(broker: Broker, name: str, records: int, fn: Callable[[], int]) -> Phase:
    cpu0, self0 = broker.cpu(), _self_cpu_seconds()
    start = time.perf_counter()
    payload = fn()
    seconds = time.perf_counter() - start
    cpu1, self1 = broker.cpu(), _self_cpu_seconds()
    broker_cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    client_cpu = self1 - self0
    if broker.mode == "in-process" and broker_cpu is not None:
        client_cpu -= broker_cpu  # this process also runs the broker thread
    return Phase(broker.mode, name, records, payload, seconds, broker_cpu, client_cpu)


def run_variants(broker: Broker, opts: Options) -> list[Phase]:
    """Idempotent and transactional produce, each read back with read_committed."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _create_topic(admin, PRIME_TOPIC, 1, exist_ok=True)
    value = os.urandom(opts.size)
    phases: list[Phase] = []
    for label in ("idempotent", "transactional"):
        transactional = label == "transactional"
        topic = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        _create_topic(admin, topic, opts.partitions)
        check = _DeliveryCheck()
        producer = ready_producer(broker.bootstrap, check, transactional=transactional)
        produce = functools.partial(
            produce_all, producer, check, topic, opts, value, transactional=transactional
        )
        phases.append(_measure(broker, f"produce {label}", opts.records, produce))
        del producer, produce
        fetch = functools.partial(consume, broker.bootstrap, topic, opts)
        phases.append(_measure(broker, f"fetch {label}", opts.records, fetch))
        _delete_topic(admin, topic)
    return phases


def _table(phases: list[Phase]) -> str:
    head = (
        "broker",
        "phase",
        "records",
        "seconds",
        "MB/s",
        "msg/s",
        "broker CPU s",
        "client CPU s",
    )
    rows = [
        (
            p.broker_mode,
            p.name,
            f"{p.records:,}",
            f"{p.seconds:.2f}",
            f"{p.mb_per_s:.1f}",
            f"{p.msg_per_s:,.0f}",
            "n/a" if p.broker_cpu_s is None else f"{p.broker_cpu_s:.2f}",
            f"{p.client_cpu_s:.2f}",
        )
        for p in phases
    ]
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]

    def line(cells: tuple[str, ...]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in pairs)

    out = [line(head), line(tuple("-" * w for w in widths))]
    out.extend(line(r) for r in rows)
    return "\n".join(out) + "\n"


def best_runs(phases: list[Phase]) -> list[Phase]:
    """The fastest run of each (broker, phase), in the order they first ran."""
    best: dict[tuple[str, str], Phase] = {}
    for phase in phases:
        key = (phase.broker_mode, phase.name)
        if key not in best or phase.seconds < best[key].seconds:
            best[key] = phase
    return list(best.values())


def plot(phases: list[Phase], opts: Options, path: str) -> None:
    """Grouped bars: MB/s of each phase, one bar per broker mode, and the target line."""
    plt = pyplot()
    names = list(dict.fromkeys(p.name for p in phases))
    modes = list(dict.fromkeys(p.broker_mode for p in phases))
    rates = {(p.broker_mode, p.name): p.mb_per_s for p in phases}
    width = 0.8 / len(modes)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for i, mode in enumerate(modes):
        shift = (i - (len(modes) - 1) / 2) * width
        bars = ax.bar(
            [n + shift for n in range(len(names))],
            [rates.get((mode, name), 0.0) for name in names],
            width,
            label=f"broker {mode}",
        )
        ax.bar_label(bars, fmt="%.0f", padding=2, fontsize=8)
    ax.axhline(TARGET_MB_S, ls="--", color="grey", label=f"target: {TARGET_MB_S:.0f} MB/s")
    ax.set_xticks(range(len(names)), [n.replace(" ", "\n", 1) for n in names])
    ax.set_xlabel("phase (fetch: read back by a read_committed consumer)")
    ax.set_ylabel("MB/s (10$^6$ bytes of record values / s)")
    ax.set_ylim(0, max(TARGET_MB_S, *rates.values()) * 1.35)  # room for the legend
    best = f", best of {opts.repeat} runs" if opts.repeat > 1 else ""
    ax.set_title(f"Embedded broker throughput seen by confluent-kafka{best}")
    ax.legend(
        loc="upper center",
        ncol=len(modes) + 1,
        fontsize=9,
        title=f"{opts.records:,} records of {opts.size} B, {opts.partitions} partitions",
        title_fontsize=9,
    )
    save(fig, path)


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per variant")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic")
    parser.add_argument("--txn-records", type=int, default=50_000, help="records per transaction")
    parser.add_argument(
        "--broker",
        choices=("subprocess", "in-process", "both"),
        default="both",
        help="where the broker runs",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run every variant this often")
    parser.add_argument(
        "--bootstrap",
        default=None,
        help="use this already running broker (e.g. a real Kafka) instead of starting one",
    )
    parser.add_argument(
        "--broker-pid", type=int, default=None, help="with --bootstrap: process to read CPU of"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw MB/s per phase (the best run of each)"
    )
    args = parser.parse_args(argv)
    return Options(
        records=args.records,
        size=args.size,
        partitions=args.partitions,
        txn_records=args.txn_records,
        broker=args.broker,
        repeat=args.repeat,
        bootstrap=args.bootstrap,
        broker_pid=args.broker_pid,
        plot=args.plot,
    )


def _broker(mode: str, opts: Options) -> contextlib.AbstractContextManager[Broker]:
    if mode == "external":
        return external_broker(opts.bootstrap or "", opts.broker_pid)
    if mode == "subprocess":
        return subprocess_broker()
    return in_process_broker()


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.bootstrap is not None:
        modes: tuple[str, ...] = ("external",)
    elif opts.broker == "both":
        modes = ("subprocess", "in-process")
    else:
        modes = (opts.broker,)
    warmup = dataclasses.replace(
        opts, records=min(opts.records, 5_000), txn_records=min(opts.txn_records, 2_500)
    )
    phases: list[Phase] = []
    for mode in modes:
        with _broker(mode, opts) as broker:
            # The first request of each API version imports its kio schema; keep that
            # one-off cost out of the numbers.
            run_variants(broker, warmup)
            for _ in range(opts.repeat):
                phases.extend(run_variants(broker, opts))
    write = sys.stdout.write
    write(
        f"{opts.records:,} records of {opts.size} B per variant, {opts.partitions} partitions, "
        f"{opts.txn_records:,} records per transaction, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}\n"
    )
    write(f"producer: {PRODUCER_SETTINGS}\n")
    write(f"consumer: {CONSUMER_SETTINGS}\n\n")
    write(_table(phases))
    if opts.repeat > 1:
        write(f"\nbest of {opts.repeat} runs:\n")
        write(_table(best_runs(phases)))
    if opts.plot:
        plot(best_runs(phases), opts, opts.plot)
        write(f"plot written to {opts.plot}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
