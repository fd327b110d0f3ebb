"""Command line: ``kafka-txn broker`` (the embedded cluster), ``kafka-txn demo`` and
``kafka-txn transactions list|abort`` (lingering transactions of a real cluster)."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import os
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pyspark_kafka_txn._version import __version__
from pyspark_kafka_txn.wire import SECURITY_PROTOCOLS

if TYPE_CHECKING:
    from pyspark_kafka_txn.client.metadata import ClusterClient
    from pyspark_kafka_txn.embedded import ListenerSecurity
    from pyspark_kafka_txn.writer.abandoned import Owner
    from pyspark_kafka_txn.writer.open_transactions import OpenTransaction

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

    _check_broker(args)
    security = _security(args)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    kafka = EmbeddedKafka(
        brokers=args.brokers,
        data_dir=args.data_dir,
        host=args.host,
        advertised_host=args.advertised_host,
        port=args.port,
        transaction_version=args.transaction_version,
        transaction_abort_interval_ms=args.abort_interval_ms,
        transaction_two_phase_commit=args.two_phase_commit,
        initial_producer_epoch=args.initial_producer_epoch,
        auto_create_topics=args.auto_create_topics,
        security=security,
        authorizer=args.authorizer,
        super_users=tuple(args.super_user or ()),
        allow_everyone_if_no_acl_found=args.allow_everyone_if_no_acl_found,
    )
    try:
        kafka.start()
    except OSError as exc:
        raise _UsageError(_start_failure(args, exc)) from None
    try:
        for name, count in args.topic or ():
            try:
                kafka.create_topic(name, count)
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
    finally:
        kafka.stop()
    # The brokers have stopped: what went wrong inside them is final.
    for error in cluster.internal_errors:
        logger.error("internal error of the embedded cluster: %s", error)
    return BROKER_INTERNAL_ERRORS if cluster.internal_errors else 0


def _security(args: argparse.Namespace) -> ListenerSecurity:
    """The listener security of ``broker``'s options (checked by :func:`_check_security`)."""
    from pyspark_kafka_txn.embedded import ListenerSecurity

    _check_security(args)
    return ListenerSecurity(
        protocol=args.security_protocol,
        users=dict(args.sasl_user or ()),
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
        ssl_cafile=args.ssl_cafile,
        ssl_client_auth=args.ssl_client_auth,
    )


def _check_security(args: argparse.Namespace) -> None:
    """Reject security options that do not fit together, or files TLS cannot load.

    Raises
    ------
    _UsageError
        Naming the option at fault: a SASL protocol without users, users or TLS files
        on a listener that would ignore them, TLS without its certificate and key, or a
        file that cannot be read or loaded.
    """
    from pyspark_kafka_txn.wire import SASL_PROTOCOLS, TLS_PROTOCOLS

    protocol = args.security_protocol
    sasl, tls = protocol in SASL_PROTOCOLS, protocol in TLS_PROTOCOLS
    if sasl and not args.sasl_user:
        raise _UsageError(
            f"argument --sasl-user: --security-protocol {protocol} needs at least one "
            "--sasl-user USER:PASSWORD (nobody could authenticate)"
        )
    if args.sasl_user and not sasl:
        raise _UsageError(
            f"argument --sasl-user: ignored by a {protocol} listener; "
            "give --security-protocol SASL_PLAINTEXT or SASL_SSL"
        )
    files = {
        "--ssl-certfile": args.ssl_certfile,
        "--ssl-keyfile": args.ssl_keyfile,
        "--ssl-cafile": args.ssl_cafile,
    }
    for option, path in files.items():
        if path is not None and not tls:
            raise _UsageError(
                f"argument {option}: ignored by a {protocol} listener; "
                "give --security-protocol SSL or SASL_SSL"
            )
    if args.ssl_client_auth and not tls:
        raise _UsageError(
            f"argument --ssl-client-auth: ignored by a {protocol} listener; "
            "give --security-protocol SSL or SASL_SSL"
        )
    if not tls:
        return
    for option in ("--ssl-certfile", "--ssl-keyfile"):
        if files[option] is None:
            raise _UsageError(
                f"argument {option}: --security-protocol {protocol} needs "
                "--ssl-certfile and --ssl-keyfile"
            )
    if args.ssl_client_auth and args.ssl_cafile is None:
        raise _UsageError(
            "argument --ssl-client-auth: needs --ssl-cafile, the CA that verifies client "
            "certificates"
        )
    for option, path in files.items():
        if path is not None and not (path.is_file() and os.access(path, os.R_OK)):
            raise _UsageError(f"argument {option}: cannot read {str(path)!r}")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(str(args.ssl_certfile), str(args.ssl_keyfile))
    except (OSError, ValueError) as exc:
        raise _UsageError(
            f"argument --ssl-certfile/--ssl-keyfile: cannot load the certificate "
            f"{str(args.ssl_certfile)!r} with the key {str(args.ssl_keyfile)!r}: {_reason(exc)}"
        ) from None
    if args.ssl_cafile is not None:
        try:
            context.load_verify_locations(cafile=str(args.ssl_cafile))
        except (OSError, ValueError) as exc:
            raise _UsageError(
                f"argument --ssl-cafile: cannot load {str(args.ssl_cafile)!r}: {_reason(exc)}"
            ) from None


def _reason(exc: Exception) -> str:
    """The short reason of an OS or TLS error (no errno, no C source line)."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _check_broker(args: argparse.Namespace) -> None:
    """Reject ``broker`` options that do not fit together, or an unusable ``--data-dir``.

    Raises
    ------
    _UsageError
        Naming the option at fault.
    """
    from pyspark_kafka_txn.embedded.config import is_wildcard

    if is_wildcard(args.host) and args.advertised_host is None:
        raise _UsageError(
            f"argument --advertised-host: needed with --host {args.host or repr('')}, which "
            "listens on every interface: give the name or address clients connect to "
            "(Kafka's advertised.listeners)"
        )
    last = args.port + args.brokers - 1
    if args.port and last > _MAX_PORT:
        raise _UsageError(
            f"argument --brokers: {args.brokers} brokers from --port {args.port} need ports "
            f"up to {last} (> {_MAX_PORT})"
        )
    if args.data_dir is not None:
        _check_data_dir(args.data_dir)


def _check_data_dir(path: Path) -> None:
    """``--data-dir`` must be (or become) a directory this process can write."""
    if path.exists() and not path.is_dir():
        raise _UsageError(f"argument --data-dir: {str(path)!r} is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _UsageError(
            f"argument --data-dir: cannot create {str(path)!r}: {_reason(exc)}"
        ) from None
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise _UsageError(f"argument --data-dir: {str(path)!r} is not writable")


def _start_failure(args: argparse.Namespace, exc: OSError) -> str:
    """The usage error of a cluster that could not start: the option at fault, why."""
    if exc.filename is not None:  # a file of the data directory
        return f"argument --data-dir: cannot use {str(exc.filename)!r}: {_reason(exc)}"
    host = args.host
    if isinstance(exc, socket.gaierror):
        return f"argument --host: cannot resolve {host!r}: {_reason(exc)}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"argument --host: {host!r} is not an address of this machine"
    ports = str(args.port) if args.brokers == 1 else f"{args.port}..{args.port + args.brokers - 1}"
    if exc.errno == errno.EADDRINUSE:
        return f"argument --port: port {ports} of {host} is already in use"
    if exc.errno == errno.EACCES:
        return f"argument --port: no permission to listen on port {ports} of {host}"
    return f"argument --host/--port: cannot listen on {host} port {ports}: {_reason(exc)}"


def _demo(args: argparse.Namespace) -> int:
    from pyspark_kafka_txn.demo import FeedPlan, run_demo

    plan = FeedPlan(orders_per_transaction=args.orders)
    return run_demo(plan, plot=args.plot)


class _UsageError(Exception):
    """A bad argument found once the command line is parsed (exit status 2).

    ``kafka-txn transactions`` prints its message after its own program name; any other
    command's reaches :func:`main`, which prints it as :class:`_Parser` prints a parse
    error.
    """


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


#: The longest ``--timeout-s`` (a day; sockets refuse timeouts beyond their C type).
_MAX_TIMEOUT_S = 86_400.0


def _timeout_s(text: str) -> float:
    """``--timeout-s``: seconds, more than 0 and at most :data:`_MAX_TIMEOUT_S`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= _MAX_TIMEOUT_S:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be > 0 and <= {_MAX_TIMEOUT_S:g}, got {text}")
    return value


def _bootstrap_servers(text: str) -> str:
    """``--bootstrap-servers HOST:PORT[,...]``, checked as the client parses it."""
    from pyspark_kafka_txn.client.metadata import parse_bootstrap
    from pyspark_kafka_txn.errors import ConfigError

    try:
        parse_bootstrap(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


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


#: The highest TCP port.
_MAX_PORT = 65535
#: The highest value of an ``int`` broker setting (Java's Integer.MAX_VALUE).
_MAX_INT = 2**31 - 1


def _port(text: str) -> int:
    """``--port``: 0 (any free port) to 65535."""
    value = _non_negative_int(text)
    if value > _MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be a port number (0..{_MAX_PORT}), got {text}")
    return value


def _interval_ms(text: str) -> int:
    """``--abort-interval-ms``: 1 to 2**31 - 1, as Kafka's ``atLeast(1)`` int setting."""
    value = _positive_int(text)
    if value > _MAX_INT:
        raise argparse.ArgumentTypeError(f"must be <= {_MAX_INT}, got {text}")
    return value


def _topic(text: str) -> tuple[str, int]:
    """``--topic NAME[:PARTITIONS]``: a name Kafka accepts, at least one partition."""
    from pyspark_kafka_txn.embedded.cluster import TopicError, validate_topic_name

    name, sep, count = text.partition(":")
    try:
        validate_topic_name(name)
    except TopicError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; expected NAME[:PARTITIONS]") from None
    if not sep:
        return name, 1
    try:
        partitions = _positive_int(count)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected NAME[:PARTITIONS] with PARTITIONS >= 1, got {text!r}"
        ) from None
    return name, partitions


def _sasl_user(text: str) -> tuple[str, str]:
    """``--sasl-user USER:PASSWORD`` (the password is never echoed)."""
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise argparse.ArgumentTypeError("expected USER:PASSWORD")
    return user, password


def _host(text: str) -> str:
    """``--host``: a name or address to listen on (empty or a wildcard: every interface)."""
    if any(c.isspace() for c in text) or (":" in text and not _is_ip(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a host name or IP address")
    return text


def _advertised_host(text: str) -> str:
    """``--advertised-host``: a host clients can connect to (no wildcard address)."""
    from pyspark_kafka_txn.embedded.config import is_wildcard

    if is_wildcard(_host(text)):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an address clients can connect to (it means every interface)"
        )
    return text


#: The chart formats ``--plot`` writes (matplotlib's, by the file's suffix).
_PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _plot_file(text: str) -> Path:
    """``demo --plot FILE``: a chart file that can be written once the demo has run."""
    path = Path(text)
    if path.suffix.lower() not in _PLOT_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a {', '.join(_PLOT_SUFFIXES)} file (the chart's format)"
        )
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: no directory {str(folder)!r}")
    if path.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be written")
    return path


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


#: How long after its --timeout-s ``kafka-txn transactions`` gives up on a worker that is
#: still waiting on the cluster (the retry loops themselves stop at --timeout-s).
_TIMEOUT_SLACK_S = 1.0

#: The columns of ``kafka-txn transactions list`` (tab-separated, as :func:`_describe`).
_COLUMNS = (
    "TRANSACTIONAL_ID\tSTATE\tPRODUCER_ID\tEPOCH\tAGE_MS\tPARTITIONS\tTIMEOUT_MS\tQUERY\t"
    "LIVENESS\tWHY"
)


def _describe(txn: OpenTransaction, now_ms: int, owner: Owner) -> str:
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
            owner.query_id or "-",
            owner.liveness,
            owner.reason,
        )
    )


def _transactions(args: argparse.Namespace) -> int:
    """``kafka-txn transactions list|abort``; exit code 0, 1 (not all done) or 2 (usage)."""
    prog = f"kafka-txn transactions {args.action}"

    abandoned = threading.Event()

    def error(message: str) -> None:
        if not abandoned.is_set():  # nothing from a worker given up on (see below)
            sys.stderr.write(f"{prog}: {message}\n")

    if args.action == "abort" and not args.prefix:
        error("--prefix must not be empty: abort never touches every transaction")
        return 2
    try:
        options = _client_options(args)
    except _UsageError as exc:
        error(str(exc))
        return 2

    from pyspark_kafka_txn.client.connection import ConnectionConfig
    from pyspark_kafka_txn.client.metadata import ClusterClient
    from pyspark_kafka_txn.client.security import SecurityConfig
    from pyspark_kafka_txn.errors import ConfigError

    timeout_s: float = args.timeout_s
    # --timeout-s bounds the whole command: every retry loop stops at the deadline, and
    # a worker still waiting on a socket (a broker that accepted the connection and never
    # answers, a slow name lookup) is given up on soon after it.
    deadline = time.monotonic() + timeout_s
    try:
        config = ConnectionConfig(
            client_id=options.get("client.id", "kafka-txn-transactions"),
            request_timeout_s=timeout_s,
            connect_timeout_s=min(timeout_s, 10.0),
            security=SecurityConfig.from_options(options),
        )
        cluster = ClusterClient(
            args.bootstrap_servers, config, retry_timeout_s=timeout_s, deadline=deadline
        )
    except ConfigError as exc:  # messages name the option, never a secret value
        error(str(exc))
        return 2
    outcome: list[int] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(_list_or_abort(args, cluster, error))
        except BaseException as exc:  # noqa: BLE001 - re-raised by the main thread
            failure.append(exc)

    worker = threading.Thread(target=work, name="kafka-txn-transactions", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline + _TIMEOUT_SLACK_S - time.monotonic()))
    if worker.is_alive():
        error(
            f"gave up after {timeout_s:g} s (--timeout-s): no answer from the cluster at "
            f"{args.bootstrap_servers}"
        )
        abandoned.set()
        cluster.close()  # fails the worker's pending calls; it ends by itself
        return 1
    if failure:
        raise failure[0]
    return outcome[0]


def _list_or_abort(
    args: argparse.Namespace, cluster: ClusterClient, error: Callable[[str], None]
) -> int:
    """List or abort the transactions of ``args`` (:func:`_transactions`' worker)."""
    from pyspark_kafka_txn.errors import (
        AuthenticationError,
        KafkaConnectionError,
        KafkaTxnError,
    )
    from pyspark_kafka_txn.writer.abandoned import owners
    from pyspark_kafka_txn.writer.open_transactions import find_open_transactions

    timeout_s: float = args.timeout_s
    where = f"the cluster at {args.bootstrap_servers}"
    with cluster:
        try:
            cluster.brokers()  # retried within --timeout-s
            found = find_open_transactions(cluster, args.prefix)
            now_ms = int(time.time() * 1000)
            chosen = [t for t in found if t.age_ms(now_ms) >= args.min_age_ms]
            owned = owners(cluster, chosen)
        except AuthenticationError as exc:
            error(f"authentication with {where} failed: {exc}")
            return 1
        except KafkaConnectionError as exc:
            error(f"cannot reach {where} within {timeout_s:g} s (--timeout-s): {exc}")
            return 1
        except KafkaTxnError as exc:
            error(f"cannot list the transactions of {where}: {exc}")
            return 1
        scope = f"with prefix {args.prefix!r}"
        if args.min_age_ms:
            scope += f" started at least {args.min_age_ms} ms ago"
        if args.action == "list":
            if chosen:
                sys.stdout.write(_COLUMNS + "\n")
            for txn in chosen:
                sys.stdout.write(_describe(txn, now_ms, owned[txn.transactional_id]) + "\n")
            sys.stdout.write(f"{len(chosen)} open transaction(s) {scope}\n")
            return 0
        spared = [
            t
            for t in chosen
            if owned[t.transactional_id].liveness == "live" and not args.include_live
        ]
        targets = [t for t in chosen if t not in spared]
        failed = _abort_all(cluster, targets, owned, now_ms, dry_run=args.dry_run, error=error)
        done = "would end" if args.dry_run else "ended"
        summary = f"{done} {len(targets) - failed} of {len(targets)} open transaction(s) {scope}"
        if spared:
            summary += (
                f"; {len(spared)} transaction(s) of live queries left alone "
                "(--include-live ends them too)"
            )
        if len(found) > len(chosen):
            summary += f"; {len(found) - len(chosen)} younger one(s) left alone"
        sys.stdout.write(summary + "\n")
        if failed:
            error(f"{failed} transaction(s) could not be ended")
            return 1
        return 0


def _abort_all(
    cluster: ClusterClient,
    transactions: Sequence[OpenTransaction],
    owned: Mapping[str, Owner],
    now_ms: int,
    *,
    dry_run: bool,
    error: Callable[[str], None],
) -> int:
    """End (or, dry, print) each transaction: commit the ones a gone query decided to
    commit, abort the others; return how many could not be ended."""
    from pyspark_kafka_txn.errors import KafkaTxnError
    from pyspark_kafka_txn.writer.abandoned import end_transaction_of

    failed = 0
    for txn in transactions:
        owner = owned[txn.transactional_id]
        if dry_run:
            if owner.commit is not None:
                verb = "would commit"
            else:
                verb = "would wait for" if txn.completing else "would abort"
        else:
            # What is left of --timeout-s (the worker gives up at the deadline anyway).
            deadline = cluster.deadline
            left_s = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                verb = end_transaction_of(cluster, txn, owner, timeout_s=left_s)
            except KafkaTxnError as exc:
                failed += 1
                error(f"could not end {txn.transactional_id!r}: {exc}")
                continue
        sys.stdout.write(f"{verb}\t{_describe(txn, now_ms, owner)}\n")
        sys.stdout.flush()
    return failed


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr: ``PROG: error: MESSAGE``
    (argparse's message, which names the argument), exit status 2; no usage block, so a
    script's log shows what was wrong in the one line. ``--help`` shows the usage."""

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


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
    parser = _Parser(
        prog="kafka-txn",
        description="kafka-txn broker: the embedded Kafka-compatible cluster. kafka-txn demo: "
        "the exactly-once pipeline through faults. kafka-txn transactions list|abort: "
        "transactions left open on a real cluster.",
        formatter_class=_Help,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more logging on stderr: -v for INFO, -vv for DEBUG (before the command)",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="kafka-txn COMMAND --help describes each",
    )

    broker = sub.add_parser(
        "broker",
        help="run the embedded Kafka-compatible cluster",
        description="Run the embedded Kafka-compatible cluster until SIGINT or SIGTERM. Exit "
        f"status 0, or {BROKER_INTERNAL_ERRORS} when the cluster met internal errors (each "
        "logged at ERROR when it stops).",
        formatter_class=_Help,
    )
    broker.add_argument(
        "--port",
        type=_port,
        default=9092,
        help="port of broker 0; broker N listens on PORT+N (0: any free ports)",
    )
    broker.add_argument(
        "--host",
        type=_host,
        default="127.0.0.1",
        help="interface to listen on (0.0.0.0 or '::': every interface, then "
        "--advertised-host is needed)",
    )
    broker.add_argument(
        "--advertised-host",
        type=_advertised_host,
        metavar="HOST",
        help="host name or address clients are told to connect to, as in Kafka's "
        "advertised.listeners (default: --host)",
    )
    broker.add_argument(
        "--brokers", type=_positive_int, default=1, metavar="N", help="number of broker nodes"
    )
    broker.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep logs, transactions and offsets here, created if missing, and recover "
        "them on restart (default: in memory)",
    )
    broker.add_argument(
        "--transaction-version",
        type=int,
        choices=(1, 2),
        default=2,
        help="finalized transaction.version feature (2 = KIP-890, as Kafka 4.x)",
    )
    broker.add_argument(
        "--abort-interval-ms",
        type=_interval_ms,
        default=10_000,
        metavar="MS",
        help="how often timed-out transactions are aborted "
        "(transaction.abort.timed.out.transaction.cleanup.interval.ms)",
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
        "--topic",
        action="append",
        type=_topic,
        metavar="NAME[:PARTITIONS]",
        help="create a topic at start, with 1 partition unless given (repeatable; kept if "
        "it exists)",
    )
    broker.add_argument(
        "--security-protocol",
        choices=SECURITY_PROTOCOLS,
        default="PLAINTEXT",
        help="listener security (SASL mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
    )
    broker.add_argument(
        "--sasl-user",
        action="append",
        type=_sasl_user,
        metavar="USER:PASSWORD",
        help="a SASL user (repeatable; at least one with a SASL --security-protocol)",
    )
    broker.add_argument(
        "--ssl-certfile",
        type=Path,
        metavar="FILE",
        help="PEM server certificate chain (needed by SSL and SASL_SSL)",
    )
    broker.add_argument(
        "--ssl-keyfile",
        type=Path,
        metavar="FILE",
        help="PEM server private key (needed by SSL and SASL_SSL)",
    )
    broker.add_argument(
        "--ssl-cafile", type=Path, metavar="FILE", help="PEM CA to verify client certificates"
    )
    broker.add_argument(
        "--ssl-client-auth",
        action="store_true",
        help="require client certificates (ssl.client.auth=required; needs --ssl-cafile)",
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
    broker.set_defaults(run=_broker, parser=broker)

    demo = sub.add_parser(
        "demo",
        help="an exactly-once Kafka -> Spark -> Kafka pipeline on the embedded cluster, "
        "through a task failure and a killed driver (needs pyspark and Java)",
        description="Show the exactly-once pipeline through faults: an independent producer "
        "writes orders in transactions (every fourth aborted) to the embedded cluster, "
        "started in this process; a Spark streaming query (local[2,3], in a child process) "
        "turns them into invoices with format('kafka_txn'); a task fails once and is "
        "retried; the Spark process is killed while committing and restarts from its "
        "checkpoint; a read_committed consumer then checks every committed order is in the "
        "output exactly once. Needs pyspark (the spark extra) and Java 17 or later "
        "($JAVA_HOME or java on the PATH); takes a few minutes. Exit status 0 when every "
        "check holds, non-zero otherwise.",
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
        "--plot",
        type=_plot_file,
        metavar="FILE.png",
        help="draw rows and latency per micro-batch into FILE (.png, .pdf or .svg; needs "
        "the plot extra, matplotlib)",
    )
    demo.set_defaults(run=_demo, parser=demo)

    txns = sub.add_parser(
        "transactions",
        help="list or abort lingering transactions of a cluster",
        description="Find open transactions by transactional-id prefix (ListTransactions + "
        "DescribeTransactions) and abort them (EndTxn). Exit codes: 0 done, 1 something "
        "could not be listed or aborted, 2 bad usage.",
        formatter_class=_Help,
    )
    actions = txns.add_subparsers(
        dest="action",
        required=True,
        metavar="ACTION",
        help="kafka-txn transactions ACTION --help describes each",
    )
    common = _Parser(add_help=False)
    common.add_argument(
        "--bootstrap-servers",
        required=True,
        type=_bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="brokers of the cluster to connect to first",
    )
    common.add_argument(
        "--prefix", required=True, help="transactional-id prefix of the transactions"
    )
    common.add_argument(
        "--min-age-ms",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="only transactions started at least N ms ago",
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
        type=_timeout_s,
        default=10.0,
        metavar="S",
        help="give up reaching the cluster / ending a transaction after S seconds",
    )
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="print the open transactions",
        description="Print the open transactions under --prefix, one tab-separated line "
        "each under a header, then their count. Changes nothing on the cluster.",
        formatter_class=_Help,
    )
    listing.set_defaults(run=_transactions, dry_run=False, parser=listing)
    abort = actions.add_parser(
        "abort",
        parents=[common],
        help="end the open transactions of queries that are gone",
        description="End the open transactions under --prefix whose kafka_txn query is not "
        "live: its liveness lease lapsed (gone), or it has none (unknown: a writer without "
        "leases, another tool). A transaction a gone query had decided to commit is "
        "committed, as its restart would; every other one is aborted. The transactions of "
        "live queries (lease renewed) are left alone unless --include-live.",
        formatter_class=_Help,
    )
    abort.add_argument("--dry-run", action="store_true", help="print what would end and why")
    abort.add_argument(
        "--include-live",
        action="store_true",
        help="also abort the transactions of live queries (their batch then fails to commit "
        "and is written again after their restart)",
    )
    abort.set_defaults(run=_transactions, parser=abort)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kafka-txn`` and ``python -m pyspark_kafka_txn``.

    Parameters
    ----------
    argv
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status of the command.

    Raises
    ------
    SystemExit
        With status 2 after a one-line usage error on stderr (a bad argument), or 0
        after ``--help`` and ``--version``.
    """
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        result: int = args.run(args)
    except _UsageError as exc:
        args.parser.error(str(exc))
    return result
