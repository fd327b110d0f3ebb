"""Command line: ``kafka-txn broker`` (the embedded cluster) and ``kafka-txn demo``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark_kafka_txn.embedded import ListenerSecurity

logger = logging.getLogger("pyspark_kafka_txn.cli")


def _broker(args: argparse.Namespace) -> int:
    from pyspark_kafka_txn.embedded import EmbeddedKafka
    from pyspark_kafka_txn.embedded.cluster import TopicError
    from pyspark_kafka_txn.embedded.protocol import ErrorCode

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        logger.info("received signal %d, stopping", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    kafka = EmbeddedKafka(
        brokers=args.brokers,
        data_dir=args.data_dir,
        host=args.host,
        port=args.port,
        transaction_version=args.transaction_version,
        transaction_abort_interval_ms=args.abort_interval_ms,
        transaction_two_phase_commit=args.two_phase_commit,
        auto_create_topics=args.auto_create_topics,
        security=_security(args),
    )
    with kafka:
        for spec in args.topic or ():
            name, _, count = spec.partition(":")
            try:
                kafka.create_topic(name, int(count or 1))
            except TopicError as exc:
                # Restarting on a data directory: the topic is already there.
                if exc.code is not ErrorCode.topic_already_exists:
                    raise
                logger.info("topic %s already exists", name)
        # The readiness line scripts wait for; stdout, flushed, nothing before it.
        sys.stdout.write(f"bootstrap.servers={kafka.bootstrap_servers}\n")
        sys.stdout.flush()
        stop.wait()
    return 0


def _security(args: argparse.Namespace) -> ListenerSecurity:
    from pyspark_kafka_txn.embedded import ListenerSecurity

    users = {}
    for item in args.sasl_user or ():
        user, sep, password = item.partition(":")
        if not sep or not user:
            raise SystemExit("kafka-txn broker: --sasl-user expects USER:PASSWORD")
        users[user] = password
    try:
        return ListenerSecurity(
            protocol=args.security_protocol,
            users=users,
            ssl_certfile=args.ssl_certfile,
            ssl_keyfile=args.ssl_keyfile,
            ssl_cafile=args.ssl_cafile,
            ssl_client_auth=args.ssl_client_auth,
        )
    except ValueError as exc:
        raise SystemExit(f"kafka-txn broker: {exc}") from None


def _demo(args: argparse.Namespace) -> int:
    from pyspark_kafka_txn.demo import run_demo

    return run_demo(records=args.records)


def build_parser() -> argparse.ArgumentParser:
    """The ``kafka-txn`` argument parser."""
    parser = argparse.ArgumentParser(prog="kafka-txn", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run the embedded Kafka-compatible cluster")
    broker.add_argument("--port", type=int, default=9092, help="port of broker 0 (0: any)")
    broker.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    broker.add_argument("--brokers", type=int, default=1, help="number of broker nodes")
    broker.add_argument("--data-dir", type=Path, default=None, help="persist state here")
    broker.add_argument(
        "--transaction-version",
        type=int,
        choices=(1, 2),
        default=2,
        help="finalized transaction.version feature (2 = KIP-890, as Kafka 4.x)",
    )
    broker.add_argument(
        "--abort-interval-ms",
        type=int,
        default=10_000,
        help="how often timed-out transactions are aborted",
    )
    broker.add_argument(
        "--auto-create-topics", action="store_true", help="auto.create.topics.enable=true"
    )
    broker.add_argument(
        "--two-phase-commit",
        action="store_true",
        help="transaction.two.phase.commit.enable=true (KIP-939): serve InitProducerId v6, "
        "whose Enable2Pc transactions never time out",
    )
    broker.add_argument(
        "--topic", action="append", metavar="NAME[:PARTITIONS]", help="create a topic at start"
    )
    broker.add_argument(
        "--security-protocol",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        default="PLAINTEXT",
        help="listener security (SASL mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
    )
    broker.add_argument(
        "--sasl-user", action="append", metavar="USER:PASSWORD", help="a SASL user (repeatable)"
    )
    broker.add_argument("--ssl-certfile", type=Path, help="PEM server certificate chain")
    broker.add_argument("--ssl-keyfile", type=Path, help="PEM server private key")
    broker.add_argument("--ssl-cafile", type=Path, help="PEM CA to verify client certificates")
    broker.add_argument(
        "--ssl-client-auth", action="store_true", help="require client certificates"
    )
    broker.set_defaults(run=_broker)

    demo = sub.add_parser("demo", help="transactional round trip on the embedded cluster")
    demo.add_argument("--records", type=int, default=1000, help="records per transaction")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kafka-txn`` and ``python -m pyspark_kafka_txn``."""
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    result: int = args.run(args)
    return result
