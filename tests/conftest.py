"""Shared fixtures: one embedded cluster per test session (or an external cluster).

Set ``KAFKA_BOOTSTRAP_SERVERS`` to run the broker tests against a real cluster; tests
that need the embedded cluster's fault injection or introspection then skip.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_kafka_txn.embedded import EmbeddedKafka

EXTERNAL = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
logging.getLogger("pyspark_kafka_txn").setLevel(logging.INFO)


@dataclass
class KafkaTarget:
    """The cluster a test talks to."""

    bootstrap_servers: str
    embedded: EmbeddedKafka | None

    def require_embedded(self) -> EmbeddedKafka:
        if self.embedded is None:
            pytest.skip("needs the embedded cluster (fault injection / introspection)")
        return self.embedded

    def create_topic(self, partitions: int = 1, prefix: str = "t", **config: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        if self.embedded is not None:
            self.embedded.create_topic(name, partitions, config or None)
        else:
            admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
            futures = admin.create_topics([NewTopic(name, partitions, 1, config=config)])
            futures[name].result(30)
        return name


@pytest.fixture(scope="session")
def embedded_kafka() -> Iterator[EmbeddedKafka]:
    # group_initial_rebalance_delay_ms: Kafka's default is 3000 ms; 300 ms keeps the
    # subscribe() tests fast while still exercising the delayed first rebalance.
    with EmbeddedKafka(
        transaction_abort_interval_ms=200, group_initial_rebalance_delay_ms=300
    ) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def kafka(request: pytest.FixtureRequest) -> KafkaTarget:
    if EXTERNAL:
        return KafkaTarget(EXTERNAL, None)
    embedded = request.getfixturevalue("embedded_kafka")
    return KafkaTarget(embedded.bootstrap_servers, embedded)


@pytest.fixture(autouse=True)
def _no_broker_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test during which the embedded broker hit an internal error."""
    embedded = None
    if not EXTERNAL and {"embedded_kafka", "kafka"} & set(request.fixturenames):
        embedded = request.getfixturevalue("embedded_kafka")
    yield
    if embedded is not None:
        errors = embedded.call(lambda c: list(c.internal_errors))
        embedded.call(lambda c: c.internal_errors.clear())
        assert not errors, f"embedded broker internal errors: {errors}"
