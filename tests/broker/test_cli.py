"""The ``broker`` command line: readiness line, topics at start, clean stop on signals."""

from __future__ import annotations

import signal

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.broker.clients import consume_all, free_port, start_cli_broker, stop_cli_broker


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
