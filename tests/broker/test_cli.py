"""The ``broker`` command line: readiness line, topics at start, clean stop on signals,
ACLs with ``--authorizer``, a non-zero exit after internal errors."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from pyspark_kafka_txn.cli import BROKER_INTERNAL_ERRORS, build_parser, main
from pyspark_kafka_txn.embedded import EmbeddedKafka
from tests.support.acls import allow
from tests.support.clients import (
    consume_all,
    free_port,
    sasl_conf,
    start_cli_broker,
    stop_cli_broker,
)
from tests.support.hang import HANG_S


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_broker_serves_topics_and_stops_on_signal(signum: int) -> None:
    port = free_port()
    proc, bootstrap = start_cli_broker("--port", str(port), "--topic", "events:3", "--topic", "one")
    try:
        assert bootstrap == f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = admin.list_topics(timeout=10).topics
        assert {name: len(t.partitions) for name, t in topics.items()} == {"events": 3, "one": 1}
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for p in range(3):
            producer.produce("events", value=f"v{p}".encode(), partition=p)
        assert producer.flush(10) == 0
        got = consume_all(bootstrap, "events", 3)
        assert [(p, v) for p, _, v in got] == [(0, b"v0"), (1, b"v1"), (2, b"v2")]
    finally:
        code, rest = stop_cli_broker(proc, signum)
    assert code == 0
    assert rest == ""  # the readiness line is the only output


def test_cli_broker_enforces_acls_with_its_super_user() -> None:
    """``--authorizer --super-user``: the super user manages ACLs, everyone else is
    refused until an ACL allows them."""
    users = ("--sasl-user", "admin:admin-pw", "--sasl-user", "app:app-pw")
    proc, bootstrap = start_cli_broker(
        "--port", "0", "--topic", "t", "--security-protocol", "SASL_PLAINTEXT", *users,
        "--authorizer", "--super-user", "User:admin",
    )  # fmt: skip
    try:
        admin = AdminClient(sasl_conf(bootstrap, "PLAIN", "admin", "admin-pw"))
        app = AdminClient(sasl_conf(bootstrap, "PLAIN", "app", "app-pw"))
        assert "t" in admin.list_topics(timeout=10).topics
        assert "t" not in app.list_topics(timeout=10).topics
        acl = allow(ResourceType.TOPIC, "t", AclOperation.DESCRIBE, "User:app")
        admin.create_acls([acl])[acl].result(10)
        assert "t" in app.list_topics(timeout=10).topics
    finally:
        code, _rest = stop_cli_broker(proc, signal.SIGTERM)
    assert code == 0


def test_cli_broker_rejects_a_malformed_super_user() -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["broker", "--super-user", "admin"])
    assert exited.value.code == 2


# A broker whose cluster records an internal error once it is up (as a handler's exception
# would), then runs the real `broker` command.
_FAULTY_BROKER = """
import sys
from pyspark_kafka_txn import cli
from pyspark_kafka_txn.embedded import EmbeddedKafka

started = EmbeddedKafka.start

def start(self):
    started(self)
    self.cluster.internal_errors.append("Metadata v12: RuntimeError('boom')")

EmbeddedKafka.start = start
sys.exit(cli.main(["broker", "--port", "0"]))
"""


def test_cli_broker_exits_non_zero_after_internal_errors() -> None:
    """Tests that run the broker in a child process learn of its internal errors from its
    exit status; each error is logged on the way out."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _FAULTY_BROKER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("bootstrap.servers=")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == BROKER_INTERNAL_ERRORS == 3
    assert "internal error of the embedded cluster: Metadata v12: RuntimeError('boom')" in err


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``kafka-txn ARGV`` in this process; assert a usage error (exit status 2, nothing
    on stdout, one line on stderr); return that line."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    assert (exited.value.code, out) == (2, ""), err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.rstrip("\n")


_NOT_PEM = __file__  # a readable file that is no PEM certificate


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["--brokers", "0"], "--brokers"),
        (["--port", "65535", "--brokers", "2"], "--brokers"),
        (["--port", "-5"], "--port"),
        (["--port", "70000"], "--port"),
        (["--port", "x"], "--port"),
        (["--topic", "bad:x"], "--topic"),
        (["--topic", "bad:0"], "--topic"),
        (["--topic", ":3"], "--topic"),
        (["--topic", "a/b:3"], "--topic"),
        (["--data-dir", "/proc/nonexistent/x"], "--data-dir"),
        (["--data-dir", _NOT_PEM], "--data-dir"),
        (["--abort-interval-ms", "-1"], "--abort-interval-ms"),
        (["--abort-interval-ms", "0"], "--abort-interval-ms"),
        (["--abort-interval-ms", str(2**31)], "--abort-interval-ms"),
        (["--security-protocol", "SASL_PLAINTEXT"], "--sasl-user"),
        (["--security-protocol", "SASL_SSL"], "--sasl-user"),
        (["--sasl-user", "alice:pw"], "--sasl-user"),
        (["--security-protocol", "SASL_PLAINTEXT", "--sasl-user", "alice"], "--sasl-user"),
        (["--security-protocol", "SSL"], "--ssl-certfile"),
        (["--ssl-cafile", _NOT_PEM], "--ssl-cafile"),
        (["--ssl-client-auth"], "--ssl-client-auth"),
        (["--security-protocol", "SSL", "--ssl-certfile", "/no.pem", "--ssl-keyfile", _NOT_PEM],
         "--ssl-certfile"),
        (
            ["--security-protocol", "SSL", "--ssl-certfile", _NOT_PEM, "--ssl-keyfile", _NOT_PEM],
            "--ssl-certfile/--ssl-keyfile",
        ),
        (["--host", "127.0.0.1:9092"], "--host"),
        (["--host", "0.0.0.0"], "--advertised-host"),
        (["--host", "::"], "--advertised-host"),
        (["--host", "0.0.0.0", "--advertised-host", "0.0.0.0"], "--advertised-host"),
        (["--transaction-version", "3"], "--transaction-version"),
        (["--initial-producer-epoch", "32767"], "--initial-producer-epoch"),
        (["--super-user", "admin"], "--super-user"),
    ],
)  # fmt: skip
def test_broker_bad_argument_is_one_usage_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    argument: str,
) -> None:
    """Each bad argument of ``broker`` is refused before anything starts, in one line
    naming it, with exit status 2."""

    def started(_kafka: EmbeddedKafka) -> None:
        raise AssertionError(f"the broker started with {argv}")  # instead of serving forever

    monkeypatch.setattr(EmbeddedKafka, "start", started)
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # pytest keeps its handlers
    line = _usage_error(capsys, "broker", *argv)
    assert line.startswith(f"kafka-txn broker: error: argument {argument}: "), line


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["demo", "--orders", "0"], "--orders"),
        (["demo", "--plot", "/nonexistent/chart.png"], "--plot"),
        (["demo", "--plot", "chart.txt"], "--plot"),
        (["transactions", "list", "--bootstrap-servers", "h:70000", "--prefix", "p"],
         "--bootstrap-servers"),
        (["transactions", "list", "--bootstrap-servers", ":9092", "--prefix", "p"],
         "--bootstrap-servers"),
        (["transactions", "abort", "--bootstrap-servers", "h:1", "--prefix", "p",
          "--timeout-s", "inf"], "--timeout-s"),
        (["transactions", "abort", "--bootstrap-servers", "h:1", "--prefix", "p",
          "--timeout-s", "nan"], "--timeout-s"),
        (["transactions", "list", "--prefix", "p"], "--bootstrap-servers"),
    ],
)  # fmt: skip
def test_other_commands_bad_argument_is_one_usage_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], argument: str
) -> None:
    line = _usage_error(capsys, *argv)
    prog = "kafka-txn " + " ".join(a for a in argv[:2] if not a.startswith("-"))
    assert line.startswith(f"{prog}: error: "), line
    assert argument in line


def test_no_command_is_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage_error(capsys).startswith("kafka-txn: error: ")
    assert _usage_error(capsys, "brokers").startswith("kafka-txn: error: argument COMMAND")


@pytest.mark.parametrize("where", ["port", "host"])
def test_broker_that_cannot_listen_is_one_usage_line(where: str) -> None:
    """A port in use, or a host that is no address of this machine: the cluster cannot
    start, which the one line says naming the option (run as a process: no traceback)."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        argv = ["--port", str(port)] if where == "port" else ["--host", "192.0.2.1"]
        proc = subprocess.run(
            [sys.executable, "-m", "pyspark_kafka_txn", "broker", *argv],
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"kafka-txn broker: error: argument --{where}: ")


def test_cli_broker_advertises_its_advertised_host() -> None:
    """``--host 0.0.0.0 --advertised-host localhost``: listens everywhere, tells clients
    (readiness line, Metadata) to connect to localhost, as Kafka's advertised.listeners."""
    proc, bootstrap = start_cli_broker(
        "--port", "0", "--host", "0.0.0.0", "--advertised-host", "localhost", "--topic", "t"
    )
    try:
        assert bootstrap.startswith("localhost:")
        port = int(bootstrap.rsplit(":", 1)[1])
        metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        assert [(b.host, b.port) for b in metadata.brokers.values()] == [("localhost", port)]
        assert "t" in metadata.topics
    finally:
        code, _rest = stop_cli_broker(proc, signal.SIGTERM)
    assert code == 0
