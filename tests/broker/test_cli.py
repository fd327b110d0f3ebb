"""The ``broker`` command line: readiness line, topics at start, clean stop on signals,
ACLs with ``--authorizer``, a non-zero exit after internal errors."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from pyspark_kafka_txn.cli import BROKER_INTERNAL_ERRORS, build_parser
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
