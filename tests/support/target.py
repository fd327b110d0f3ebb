"""The cluster a test talks to, whichever it is: the embedded one, Apache Kafka, or an
external one; and the request faults that both the embedded cluster and Apache Kafka (through
its proxies) can produce, so that a failure test runs on both."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.faults import FaultRule
from tests.support.apache_kafka import ApacheKafka, default_version, wait_partitions_ready
from tests.support.apache_kafka.proxy import Rule

#: ``KAFKA_BOOTSTRAP_SERVERS``: an external cluster the tests may use.
EXTERNAL = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
#: The kind of cluster this test session talks to (``KAFKA_TXN_TARGET``).
TARGET = os.environ.get("KAFKA_TXN_TARGET") or ("external" if EXTERNAL else "embedded")
assert TARGET in ("embedded", "apache", "external"), f"unknown KAFKA_TXN_TARGET={TARGET!r}"


def transaction_versions() -> list[int]:
    """The transaction versions a cluster of the session's kind can be formatted with,
    newest first (Apache Kafka before 4.0 has only version 1's protocol)."""
    if TARGET == "apache" and int(default_version().split(".")[0]) < 4:
        return [1]
    return [2, 1]


def client_transaction_versions() -> list[int]:
    """The transaction versions a client may ask for against the session's ``kafka``
    cluster: those up to the version it finalized (a client asking for 2 where the cluster
    finalized 1 is refused, as Kafka's own producer never does it), newest first."""
    if TARGET == "apache":
        return list(range(apache_transaction_version(), 0, -1))
    return [2, 1]


def apache_transaction_version() -> int:
    """The transaction version of the session's Apache Kafka cluster."""
    tv = os.environ.get("KAFKA_TXN_APACHE_TV")
    return int(tv) if tv else transaction_versions()[0]


@dataclass
class KafkaTarget:
    """The cluster a test talks to: the embedded one, Apache Kafka, or an external one."""

    bootstrap_servers: str
    embedded: EmbeddedKafka | None = None
    apache: ApacheKafka | None = None

    @property
    def name(self) -> str:
        if self.embedded is not None:
            return "embedded"
        return "apache" if self.apache is not None else "external"

    def restart(self) -> None:
        """Every broker down and up again on its data: the embedded cluster (a durable
        one: it needs a data directory) restarts; every node of Apache Kafka is killed
        with SIGKILL first (no controlled shutdown, no flush)."""
        if self.apache is not None:
            for node in self.apache.nodes:
                self.apache.kill(node.node_id)
            for node in self.apache.nodes:
                self.apache.restart(node.node_id, wait=False)
            self.apache.wait_ready()
        elif self.embedded is not None:
            self.embedded.restart()
        else:
            pytest.fail("an external cluster cannot be restarted by the tests")

    # -- request faults, on the embedded cluster and on Apache Kafka ------------------------

    @property
    def fault_bootstrap_servers(self) -> str:
        """Bootstrap servers of a client whose requests :meth:`stall` and :meth:`delay`
        reach (on Apache Kafka, the proxies in front of the brokers)."""
        if self.apache is not None:
            return self.apache.proxied_bootstrap_servers
        self._faults_possible()
        return self.bootstrap_servers

    def stall(self, api_key: int) -> Stall:
        """From now on, requests of ``api_key`` (a :mod:`pyspark_kafka_txn.wire` constant)
        from clients of :attr:`fault_bootstrap_servers` never succeed, until
        :meth:`clear_faults`: the embedded cluster answers them with the retriable
        COORDINATOR_LOAD_IN_PROGRESS, Apache Kafka's proxies hold them and then drop them with
        their connections (never delivered late)."""
        if self.apache is not None:
            return Stall(apache=self.apache.hold(api_key))
        embedded = self._faults_possible()
        return Stall(
            embedded=embedded.fail_requests(api_key, "COORDINATOR_LOAD_IN_PROGRESS", count=1 << 30)
        )

    def delay(self, api_key: int, seconds: float, count: int) -> Stall:
        """Delay the next ``count`` requests of ``api_key`` by ``seconds`` (on Apache Kafka,
        ``count`` per broker)."""
        if self.apache is not None:
            return Stall(apache=self.apache.delay(api_key, seconds, count))
        return Stall(embedded=self._faults_possible().delay_requests(api_key, seconds, count=count))

    def drop_connections(self) -> int:
        """Close every connection of the clients of :attr:`fault_bootstrap_servers` (as a
        broker restart, or a broker closing idle connections, does); the number closed."""
        if self.apache is not None:
            return self.apache.drop_connections()
        return self._faults_possible().drop_connections()

    def clear_faults(self) -> None:
        """Lift every fault of :meth:`stall` and :meth:`delay`."""
        if self.apache is not None:
            self.apache.clear()
        elif self.embedded is not None:
            self.embedded.clear_faults()

    def _faults_possible(self) -> EmbeddedKafka:
        if self.embedded is None:
            pytest.fail("request faults need the embedded cluster or Apache Kafka's proxies")
        return self.embedded

    def require_embedded(self) -> EmbeddedKafka:
        """The embedded cluster; only tests marked ``embedded_only`` may ask for it."""
        if self.embedded is None:
            pytest.fail(
                "this test needs the embedded cluster: mark it "
                '@pytest.mark.embedded_only("why") so other targets deselect it'
            )
        return self.embedded

    def create_topic(
        self, partitions: int = 1, prefix: str = "t", *, name: str = "", **config: str
    ) -> str:
        """Create a topic (named ``name``, else ``prefix`` and a random suffix) and wait
        until every partition is ready; return its name."""
        name = name or f"{prefix}-{uuid.uuid4().hex[:10]}"
        if self.embedded is not None:
            self.embedded.create_topic(name, partitions, config or None)
        else:
            admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
            futures = admin.create_topics([NewTopic(name, partitions, -1, config=config)])
            futures[name].result(30)
            wait_partitions_ready(
                {"bootstrap.servers": self.bootstrap_servers}, name, partitions, 60
            )
        return name

    def delete_topic(self, name: str) -> None:
        """Delete a topic and wait until the cluster no longer lists it."""
        if self.embedded is not None:
            self.embedded.delete_topic(name)
            return
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        admin.delete_topics([name])[name].result(30)
        deadline = time.monotonic() + 60
        while name in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, f"topic {name} still listed 60 s after deletion"
            time.sleep(0.05)


@dataclass
class Stall:
    """The rule of one :meth:`KafkaTarget.stall` or :meth:`KafkaTarget.delay`."""

    embedded: FaultRule | None = None
    apache: list[Rule] | None = None

    @property
    def hits(self) -> int:
        """How many requests it caught so far (proof that the fault happened)."""
        if self.embedded is not None:
            return self.embedded.hits
        return sum(r.hits for r in self.apache or ())
