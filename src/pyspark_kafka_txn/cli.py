"""Command line: ``kafka-txn broker`` (the embedded cluster), ``kafka-txn demo`` and
``kafka-txn transactions list|abort`` (lingering transactions of a real cluster)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark_kafka_txn._version import __version__
from pyspark_kafka_txn.wire import SECURITY_PROTOCOLS

if TYPE_CHECKING:
    from pyspark_kafka_txn.client.metadata import ClusterClient
    from pyspark_kafka_txn.embedded import ListenerSecurity
    from pyspark_kafka_txn.writer.lingering import OpenTransaction

logger = logging.getLogger(__name__)


#: Exit status of ``broker`` when the cluster met internal errors (an exception in a request
#: handler or a timer: a bug of the embedded cluster, each logged at ERROR on the way out).
BROKER_INTERNAL_ERRORS = 3


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
        initial_producer_epoch=args.initial_producer_epoch,
        auto_create_topics=args.auto_create_topics,
        security=_security(args),
        authorizer=args.authorizer,
        super_users=tuple(args.super_user or ()),
        allow_everyone_if_no_acl_found=args.allow_everyone_if_no_acl_found,
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
        cluster = kafka.cluster
    # The brokers have stopped: what went wrong inside them is final.
    for error in cluster.internal_errors:
        logger.error("internal error of the embedded cluster: %s", error)
    return BROKER_INTERNAL_ERRORS if cluster.internal_errors else 0


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
    from pyspark_kafka_txn.demo import FeedPlan, run_demo

    plan = FeedPlan(orders_per_transaction=args.orders)
    return run_demo(plan, plot=args.plot)


class _UsageError(Exception):
    """A bad option of ``kafka-txn transactions`` (exit code 2)."""


#: Options of ``--command-config`` / ``-X`` besides the security ones.
_CLIENT_OPTIONS = frozenset({"client.id"})
#: The two spellings of SASL credentials.
_CREDENTIALS = (frozenset({"sasl.jaas.config"}), frozenset({"sasl.username", "sasl.password"}))


def _read_properties(path: Path) -> dict[str, str]:
    """Parse a Java properties file (``key=value``, ``key: value`` or ``key value``).

    Comments (``#``, ``!``), blank lines, line continuations (a trailing ``\\``) and the
    escapes of ``java.util.Properties`` are handled.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise _UsageError(f"cannot read --command-config {str(path)!r}: {reason}") from None
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    out: dict[str, str] = {}
    for line in logical:
        key, value = _split_property(line)
        if key:
            out[key] = value
    return out


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    key: list[str] = []
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            key.append(line[i : i + 2])
            i += 2
            continue
        if char in "=:" or char.isspace():
            break
        key.append(char)
        i += 1
    rest = line[i:].lstrip()
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip()
    return _unescape("".join(key)), _unescape(rest)


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and len(text) >= i + 6:
            try:
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def _client_options(args: argparse.Namespace) -> dict[str, str]:
    """``--command-config`` then ``-X`` (which wins), checked against the known names.

    SASL credentials given with ``-X`` replace the file's in either spelling
    (``sasl.jaas.config`` or ``sasl.username`` / ``sasl.password``): otherwise a file's
    JAAS line would silently win over ``-X sasl.password``. Values are never echoed:
    they may be passwords.
    """
    from pyspark_kafka_txn.client.security import SECURITY_OPTIONS

    known = SECURITY_OPTIONS | _CLIENT_OPTIONS
    options: dict[str, str] = {}
    from_file: set[str] = set()
    if args.command_config is not None:
        for key, value in _read_properties(args.command_config).items():
            if key in known:
                options[key] = value
                from_file.add(key)
            else:
                sys.stderr.write(
                    f"kafka-txn transactions: ignoring {key!r} of --command-config "
                    "(not a security or client option of this tool)\n"
                )
    for item in args.option or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise _UsageError("-X expects KEY=VALUE")
        if key not in known:
            raise _UsageError(f"-X {key}: unknown option (known: {', '.join(sorted(known))})")
        for group in _CREDENTIALS:
            if key in group:
                for other in _CREDENTIALS:
                    if other is not group:
                        for stale in other & from_file:
                            options.pop(stale, None)
        options[key] = value
    return options


def _principal(text: str) -> str:
    from pyspark_kafka_txn.embedded.acl import InvalidAclError, check_principal

    try:
        check_principal(text)
    except InvalidAclError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; expected User:NAME") from None
    return text


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _initial_producer_epoch(text: str) -> int:
    """``--initial-producer-epoch``: an integer the embedded cluster accepts."""
    from pyspark_kafka_txn.embedded.txn import check_initial_producer_epoch

    value = _integer(text)
    try:
        return check_initial_producer_epoch(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _int_at_least(text: str, least: int) -> int:
    value = _integer(text)
    if value < least:
        raise argparse.ArgumentTypeError(f"must be >= {least}, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def _positive_int(text: str) -> int:
    return _int_at_least(text, 1)


#: The columns of ``kafka-txn transactions list`` (tab-separated, as :func:`_describe`).
_COLUMNS = "TRANSACTIONAL_ID\tSTATE\tPRODUCER_ID\tEPOCH\tAGE_MS\tPARTITIONS\tTIMEOUT_MS"


def _describe(txn: OpenTransaction, now_ms: int) -> str:
    parts = ",".join(f"{topic}-{partition}" for topic, partition in txn.partitions) or "-"
    return "\t".join(
        (
            txn.transactional_id,
            txn.state,
            str(txn.producer_id),
            str(txn.producer_epoch),
            str(txn.age_ms(now_ms)),
            parts,
            str(txn.timeout_ms),
        )
    )


def _transactions(args: argparse.Namespace) -> int:
    """``kafka-txn transactions list|abort``; exit code 0, 1 (not all done) or 2 (usage)."""
    prog = f"kafka-txn transactions {args.action}"

    def error(message: str) -> None:
        sys.stderr.write(f"{prog}: {message}\n")

    if args.action == "abort" and not args.prefix:
        error("--prefix must not be empty: abort never touches every transaction")
        return 2
    try:
        options = _client_options(args)
    except _UsageError as exc:
        error(str(exc))
        return 2

    import time

    from pyspark_kafka_txn.client.connection import ConnectionConfig
    from pyspark_kafka_txn.client.metadata import ClusterClient
    from pyspark_kafka_txn.client.security import SecurityConfig
    from pyspark_kafka_txn.errors import (
        AuthenticationError,
        ConfigError,
        KafkaConnectionError,
        KafkaTxnError,
    )
    from pyspark_kafka_txn.writer.lingering import find_open_transactions

    timeout_s: float = args.timeout_s
    try:
        config = ConnectionConfig(
            client_id=options.get("client.id", "kafka-txn-transactions"),
            request_timeout_s=timeout_s,
            connect_timeout_s=min(timeout_s, 10.0),
            security=SecurityConfig.from_options(options),
        )
        cluster = ClusterClient(args.bootstrap_servers, config, retry_timeout_s=timeout_s)
    except ConfigError as exc:  # messages name the option, never a secret value
        error(str(exc))
        return 2
    where = f"the cluster at {args.bootstrap_servers}"
    with cluster:
        try:
            cluster.retrying("bootstrap", cluster.brokers)
            found = find_open_transactions(cluster, args.prefix)
        except AuthenticationError as exc:
            error(f"authentication with {where} failed: {exc}")
            return 1
        except KafkaConnectionError as exc:
            error(f"cannot reach {where} within {timeout_s:g} s (--timeout-s): {exc}")
            return 1
        except KafkaTxnError as exc:
            error(f"cannot list the transactions of {where}: {exc}")
            return 1
        now_ms = int(time.time() * 1000)
        chosen = [t for t in found if t.age_ms(now_ms) >= args.min_age_ms]
        scope = f"with prefix {args.prefix!r}"
        if args.min_age_ms:
            scope += f" started at least {args.min_age_ms} ms ago"
        if args.action == "list":
            if chosen:
                sys.stdout.write(_COLUMNS + "\n")
            for txn in chosen:
                sys.stdout.write(_describe(txn, now_ms) + "\n")
            sys.stdout.write(f"{len(chosen)} open transaction(s) {scope}\n")
            return 0
        failed = _abort_all(cluster, chosen, now_ms, dry_run=args.dry_run, error=error)
        done = "would abort" if args.dry_run else "aborted"
        summary = f"{done} {len(chosen) - failed} of {len(chosen)} open transaction(s) {scope}"
        if len(found) > len(chosen):
            summary += f"; {len(found) - len(chosen)} younger one(s) left alone"
        sys.stdout.write(summary + "\n")
        if failed:
            error(f"{failed} transaction(s) could not be aborted")
            return 1
        return 0


def _abort_all(
    cluster: ClusterClient,
    transactions: Sequence[OpenTransaction],
    now_ms: int,
    *,
    dry_run: bool,
    error: Callable[[str], None],
) -> int:
    """Abort (or, dry, print) each transaction; return how many could not be aborted."""
    from pyspark_kafka_txn.errors import KafkaTxnError
    from pyspark_kafka_txn.writer.lingering import abort_open_transaction

    failed = 0
    for txn in transactions:
        if dry_run:
            verb = "would wait for" if txn.completing else "would abort"
        else:
            try:
                abort_open_transaction(cluster, txn)
            except KafkaTxnError as exc:
                failed += 1
                error(f"could not abort {txn.transactional_id!r}: {exc}")
                continue
            # A Prepare* transaction is completed by its coordinator, never aborted.
            verb = "completed" if txn.completing else "aborted"
        sys.stdout.write(f"{verb}\t{_describe(txn, now_ms)}\n")
        sys.stdout.flush()
    return failed


class _Help(argparse.HelpFormatter):
    """Help text with each option's default, where it has one worth saying."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        unset = default is None or default is False or default in ("", argparse.SUPPRESS)
        if action.option_strings and not unset:
            text += " (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    """The ``kafka-txn`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="kafka-txn",
        description="kafka-txn broker: the embedded Kafka-compatible cluster. kafka-txn demo: "
        "the exactly-once pipeline through faults. kafka-txn transactions list|abort: "
        "transactions left open on a real cluster.",
        formatter_class=_Help,
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser(
        "broker",
        help="run the embedded Kafka-compatible cluster",
        description="Run the embedded Kafka-compatible cluster until SIGINT or SIGTERM. Exit "
        f"status 0, or {BROKER_INTERNAL_ERRORS} when the cluster met internal errors (each "
        "logged at ERROR when it stops).",
        formatter_class=_Help,
    )
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
        "--initial-producer-epoch",
        type=_initial_producer_epoch,
        default=0,
        metavar="N",
        help="test aid (no Kafka setting): new producer ids of transactional ids start at "
        "epoch N (0..32766) instead of 0, so that producer-id rotation at epoch exhaustion "
        "(32766) is reached in a few transactions",
    )
    broker.add_argument(
        "--topic", action="append", metavar="NAME[:PARTITIONS]", help="create a topic at start"
    )
    broker.add_argument(
        "--security-protocol",
        choices=SECURITY_PROTOCOLS,
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
    broker.add_argument(
        "--authorizer",
        action="store_true",
        help="enforce ACLs (Kafka's StandardAuthorizer; manage them with kafka-acls.sh or "
        "an admin client); without it everything is allowed",
    )
    broker.add_argument(
        "--super-user",
        action="append",
        metavar="User:NAME",
        type=_principal,
        help="super.users entry, allowed everything (repeatable)",
    )
    broker.add_argument(
        "--allow-everyone-if-no-acl-found",
        action="store_true",
        help="allow.everyone.if.no.acl.found=true: resources without any ACL are open",
    )
    broker.set_defaults(run=_broker)

    demo = sub.add_parser(
        "demo",
        help="an exactly-once Kafka -> Spark -> Kafka pipeline on the embedded cluster, "
        "through a task failure and a killed driver",
        formatter_class=_Help,
    )
    demo.add_argument(
        "--orders",
        type=_positive_int,
        default=100,
        metavar="N",
        help="orders (records) per input transaction",
    )
    demo.add_argument(
        "--plot", type=Path, metavar="FILE.png", help="draw rows and latency per micro-batch"
    )
    demo.set_defaults(run=_demo)

    txns = sub.add_parser(
        "transactions",
        help="list or abort lingering transactions of a cluster",
        description="Find open transactions by transactional-id prefix (ListTransactions + "
        "DescribeTransactions) and abort them (EndTxn). Exit codes: 0 done, 1 something "
        "could not be listed or aborted, 2 bad usage.",
        formatter_class=_Help,
    )
    actions = txns.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap-servers", required=True, metavar="HOST:PORT[,...]", help="the cluster"
    )
    common.add_argument(
        "--prefix", required=True, help="transactional-id prefix of the transactions"
    )
    common.add_argument(
        "--min-age-ms",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="only transactions started at least N ms ago. With 0, abort also ends the "
        "batches that live writers are committing right now: give it more than the longest "
        "micro-batch (their commit then fails and they rewrite the batch)",
    )
    common.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="properties file with security.protocol, ssl.*, sasl.* (as kafka-transactions.sh)",
    )
    common.add_argument(
        "-X",
        dest="option",
        action="append",
        metavar="KEY=VALUE",
        help="a client option, overrides --command-config (repeatable)",
    )
    common.add_argument(
        "--timeout-s",
        type=_positive_float,
        default=10.0,
        metavar="S",
        help="give up reaching the cluster / ending a transaction after S seconds",
    )
    actions.add_parser(
        "list",
        parents=[common],
        help="print the open transactions",
        formatter_class=_Help,
    ).set_defaults(run=_transactions, dry_run=False)
    abort = actions.add_parser(
        "abort",
        parents=[common],
        help="abort the open transactions",
        description="Abort the open transactions under --prefix. Warning: with the default "
        "--min-age-ms 0 this also aborts the transactions of batches that live queries are "
        "writing or committing now; stop those queries first, or set --min-age-ms above the "
        "longest micro-batch.",
        formatter_class=_Help,
    )
    abort.add_argument("--dry-run", action="store_true", help="print, abort nothing")
    abort.set_defaults(run=_transactions)
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
