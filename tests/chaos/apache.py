"""The chaos pipeline on a three-node Apache Kafka cluster (``--kafka apache``).

The cluster is :class:`~tests.support.apache_kafka.ApacheKafka` (KRaft, every node a broker
and a controller voter), formatted with the plan's ``transaction.version``. The query
connects through the proxies in front of the nodes
(:attr:`~tests.support.apache_kafka.ApacheKafka.proxied_bootstrap_servers`), so its requests
can be held, delayed and lost and its connections cut; the input producers and the checker
connect to the brokers directly and meet only the node faults.

The faults of :data:`tests.chaos.schedule.APACHE_KINDS` that touch the cluster:

* ``node_kill``: the node leading an output partition, or the transaction coordinator of
  one of the writer's transactional ids (found with FindCoordinator), is killed with
  SIGKILL, stays down for ``down_s`` and is restarted on its data;
* ``node_pause``: such a node is stopped with SIGSTOP for ``seconds`` (it keeps its sockets
  and answers nothing), then continued;
* ``controller_kill``: the active KRaft controller (``kafka-metadata-quorum describe
  --status``, ``LeaderId``) is killed with SIGKILL; another voter must take over before it
  is restarted;
* ``driver_kill_after_decision`` / ``driver_kill_before_decision``: the proxies hold the
  query's EndTxn / OffsetCommit (the decision record) until one was sent, then the whole
  Spark process is killed; the held requests are dropped, never delivered late;
* ``output_txn_timeout``: EndTxn held until the broker has aborted the decided batch's
  transactions at their timeout (with ``--apache-2pc``, brokers with KIP-939 on, they never
  expire: EndTxn is held for the timeout and its slack, then released, and the batch must
  commit; an expiry is an anomaly);
* ``drop_connections``, ``lost_responses``, ``delays``: through the proxies.

After a node fault the harness waits (still supervising the query) until every node is a
registered broker again and every partition's replicas are back in sync, so that the next
fault meets a whole cluster. Each fault's report entry says whether it was seen to happen
(``happened``): a request caught by a rule, a node down and back, a new controller.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.wire import (
    COORDINATOR_TXN,
    END_TXN,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    TXN_OFFSET_COMMIT,
)
from tests.chaos.checker import high_watermarks
from tests.chaos.feed import ChaosFeed
from tests.chaos.run import ARM_S, OUTPUT, Harness
from tests.chaos.schedule import Fault, Plan
from tests.support.apache_kafka import ApacheKafka, default_version, wait_partitions_ready
from tests.support.apache_kafka.proxy import KafkaProxy, Rule

#: The API keys of the request names the schedule uses.
API_KEYS = {
    "Produce": PRODUCE,
    "Fetch": FETCH,
    "ListOffsets": LIST_OFFSETS,
    "OffsetCommit": OFFSET_COMMIT,
    "OffsetFetch": OFFSET_FETCH,
    "InitProducerId": INIT_PRODUCER_ID,
    "EndTxn": END_TXN,
    "TxnOffsetCommit": TXN_OFFSET_COMMIT,
}
#: After a node fault, how long the cluster may take to be whole again (every broker
#: registered, every replica in sync) before the run goes on regardless.
RECOVERY_S = 120.0
#: The broker settings of ``--apache-2pc`` (Kafka's default transaction.max.timeout.ms).
KIP_939 = {
    "transaction.two.phase.commit.enable": "true",
    "unstable.api.versions.enable": "true",
}
#: Apache Kafka's sweep aborts timed-out transactions every second, then writes the
#: markers through the partition leaders: more slack than the embedded cluster needs.
EXPIRY_SLACK_S = 10.0

_T = TypeVar("_T")


# --- looking at the cluster from outside -----------------------------------------------


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def create_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 120.0) -> None:
    """Create ``name`` (the cluster's default replication) and return once each partition
    has a leader that answers ListOffsets (Kafka creates them asynchronously)."""
    admin = _admin(bootstrap)  # kept alive until the future resolves
    admin.create_topics([NewTopic(name, partitions)])[name].result(timeout_s)
    wait_partitions_ready(
        {"bootstrap.servers": bootstrap, "log_level": 0}, name, partitions, timeout_s
    )


def partition_leader(bootstrap: str, topic: str, partition: int) -> int:
    """The node leading ``topic``-``partition`` (Metadata), or -1 if it has none."""
    metadata = _admin(bootstrap).list_topics(topic, timeout=30)
    return int(metadata.topics[topic].partitions[partition].leader)


def txn_coordinator(bootstrap: str, transactional_id: str) -> int:
    """The node coordinating ``transactional_id`` (FindCoordinator)."""
    with ClusterClient(bootstrap, retry_timeout_s=60) as cluster:
        return cluster.coordinator(COORDINATOR_TXN, transactional_id).node_id


def active_controller(kafka: ApacheKafka) -> int:
    """The KRaft quorum's leader, as ``kafka-metadata-quorum describe --status`` names it.

    Raises
    ------
    RuntimeError
        If the tool failed or named no leader (the quorum is electing one).
    """
    done = kafka.tool("kafka-metadata-quorum", "describe", "--status")
    found = re.search(r"^LeaderId:\s*(-?\d+)", done.stdout, re.MULTILINE)
    if done.returncode != 0 or found is None or int(found.group(1)) < 0:
        raise RuntimeError(f"no quorum leader: {done.stdout[-500:]}{done.stderr[-1500:]}")
    return int(found.group(1))


def serves(kafka: ApacheKafka, node_id: int) -> bool:
    """Whether node ``node_id`` answers Metadata on its own listener and counts itself among
    the live brokers (a node just started, or just woken from SIGSTOP, may not yet)."""
    from confluent_kafka import KafkaException

    node = kafka.node(node_id)
    try:
        metadata = _admin(f"127.0.0.1:{node.port}").list_topics(timeout=5)
    except KafkaException:
        return False
    return node_id in metadata.brokers and int(metadata.orig_broker_id) == node_id


def out_of_sync(bootstrap: str) -> list[str]:
    """Partitions (internal topics included) without a leader or with a replica out of
    the in-sync set."""
    metadata = _admin(bootstrap).list_topics(timeout=30)
    return sorted(
        f"{topic.topic}-{p.id}"
        for topic in metadata.topics.values()
        for p in topic.partitions.values()
        if p.leader < 0 or set(p.replicas) - set(p.isrs)
    )


def proxies(kafka: ApacheKafka) -> list[KafkaProxy]:
    """The proxy in front of each node."""
    out = [node.proxy for node in kafka.nodes]
    assert all(p is not None for p in out), "the cluster is not started"
    return [p for p in out if p is not None]


def hits(rules: list[Rule]) -> int:
    """How many requests ``rules`` (one per node) caught in all."""
    return sum(rule.hits for rule in rules)


# --- the harness -------------------------------------------------------------------------


class ApacheHarness(Harness):
    """The chaos pipeline on a three-node Apache Kafka cluster.

    Parameters
    ----------
    plan
        A plan drawn for the ``apache`` target.
    work
        The seed's work directory; the nodes' data and logs go to ``work/kafka``.
    """

    def __init__(self, plan: Plan, work: Path) -> None:
        super().__init__(plan, work)
        (work / "kafka").mkdir()
        version = default_version()
        # Kafka before 4.0 knows only transaction version 1's protocol (and no feature flag).
        tv = plan.transaction_version if int(version.split(".")[0]) >= 4 else None
        self.apache = ApacheKafka(
            plan.brokers,
            version=version,
            transaction_version=tv,
            workdir=work / "kafka",
            config=KIP_939 if plan.broker_two_phase else None,
        )
        # The seed's work directory is removed by the runner, after keeping the logs of a
        # seed with anomalies: close() must leave the node logs to it.
        self.apache.keep_logs = True
        self.result.cluster = (
            f"Apache Kafka {version}, {plan.brokers} nodes, transaction.version {tv or 1}"
            + (", KIP-939 on" if plan.broker_two_phase else "")
        )
        #: Rules whose hits are known only at the end: (index in applied, rules).
        self._watched: list[tuple[int, list[Rule]]] = []

    # --- the cluster ---------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return self.apache.bootstrap_servers

    @property
    def job_bootstrap(self) -> str:
        return self.apache.proxied_bootstrap_servers

    def cluster(self) -> contextlib.AbstractContextManager[object]:
        return self.apache

    def create_topic(self, name: str, partitions: int) -> None:
        create_topic(self.bootstrap, name, partitions)

    def clear_faults(self) -> None:
        for index, rules in self._watched:
            entry = self.result.applied[index]
            entry["hits"] = hits(rules)
            entry["happened"] = entry["hits"] > 0
        self._watched.clear()
        self.apache.clear()

    def pinned(self) -> dict[int, tuple[int, int]]:
        stable = high_watermarks(self.bootstrap, OUTPUT, "read_committed")
        high = high_watermarks(self.bootstrap, OUTPUT, "read_uncommitted")
        return {p: (stable[p], high[p]) for p in high if stable.get(p) != high[p]}

    def expiry_wait_s(self) -> float:
        return super().expiry_wait_s() + EXPIRY_SLACK_S

    # --- faults --------------------------------------------------------------------

    def apply_cluster(self, fault: Fault, feed: ChaosFeed) -> dict[str, Any]:
        p = fault.params
        if fault.kind in ("driver_kill_after_decision", "driver_kill_before_decision"):
            api = END_TXN if fault.kind == "driver_kill_after_decision" else OFFSET_COMMIT
            # Only the query talks through the proxies: the feed's EndTxns go direct.
            rules = self.apache.hold(api)
            self._until(lambda: hits(rules) > 0, ARM_S)
            caught = hits(rules)
            self.crash()
            open_partitions = self.pinned()
            self._release(rules)  # the held requests are dropped, never delivered late
            self.pump(0)
            return {
                "hits": caught,
                "open_output_partitions": open_partitions,
                "happened": caught > 0,
            }
        if fault.kind == "output_txn_timeout":
            rules = self.apache.hold(END_TXN)
            self._until(lambda: hits(rules) > 0, ARM_S)
            caught, held = hits(rules), self.pinned()
            deadline = time.monotonic() + self.expiry_wait_s()
            while self.pinned() and time.monotonic() < deadline:
                self.pump(0.2)
            expired = bool(held) and not self.pinned()
            self._release(rules)
            self.pump(0)
            return {
                "hits": caught,
                "open_output_partitions": held,
                "expired": expired,
                "happened": caught > 0,
            }
        if fault.kind == "node_kill":
            node, role = self._node(p)
            return {**self._kill(node, p["down_s"]), "role": role}
        if fault.kind == "controller_kill":
            leader = self._background(lambda: active_controller(self.apache))
            outcome = self._kill(leader, p["down_s"], failover=True)
            return {**outcome, "role": "active controller"}
        if fault.kind == "node_pause":
            node, role = self._node(p)
            self.apache.pause(node)
            started = time.monotonic()
            try:
                self.pump(p["seconds"])
            finally:
                self.apache.resume(node)
            paused = round(time.monotonic() - started, 1)
            outcome = {"node_id": node, "role": role, "paused_s": paused, **self._recover(node)}
            return {**outcome, "happened": outcome["recovered"]}
        if fault.kind == "drop_connections":
            return self.drop_connections(
                lambda: sum(proxy.drop_connections() for proxy in proxies(self.apache))
            )
        if fault.kind in ("lost_responses", "delays"):
            api = API_KEYS[p["api"]]
            if fault.kind == "delays":
                rules = self.apache.delay(api, p["seconds"], p["count"])
            else:
                rules = [proxy.lose_responses(api, p["count"]) for proxy in proxies(self.apache)]
            self.wait_for_hit(lambda: hits(rules))
            self._watch(rules)
            return {}
        raise ValueError(f"fault kind {fault.kind} cannot be injected on Apache Kafka")

    def _release(self, rules: list[Rule]) -> None:
        """Lift a fault's own rules (one per node); other faults' rules stand."""
        for proxy, rule in zip(proxies(self.apache), rules, strict=True):
            proxy.release(rule)

    def _watch(self, rules: list[Rule]) -> None:
        # The fault's entry is appended to the report right after apply() returns.
        self._watched.append((len(self.result.applied), rules))

    def _node(self, params: dict[str, Any]) -> tuple[int, str]:
        """The node a ``node_kill`` / ``node_pause`` hits, and what it is to the query."""
        if params["node"] == "txn_coordinator" and self.query:
            tid = self.writer_id(params["partition"])
            node = self._background(lambda: txn_coordinator(self.bootstrap, tid))
            return node, f"transaction coordinator of {tid}"
        partition = params["partition"] % self.plan.output_partitions
        node = self._background(lambda: partition_leader(self.bootstrap, OUTPUT, partition))
        if node < 0:
            raise RuntimeError(f"{OUTPUT}-{partition} has no leader")
        return node, f"leader of {OUTPUT}-{partition}"

    def _kill(self, node: int, down_s: float, *, failover: bool = False) -> dict[str, Any]:
        self.apache.kill(node)
        started = time.monotonic()
        outcome: dict[str, Any] = {"node_id": node}
        new_controller: int | None = None
        if failover:
            # Proof of the failover: another voter leads the quorum while this one is down.
            new_controller = self._background(lambda: self._controller_other_than(node))
            outcome["new_controller"] = new_controller
        self.pump(max(0.0, started + down_s - time.monotonic()))
        outcome["down_s"] = round(time.monotonic() - started, 1)
        self.apache.restart(node, wait=False)
        outcome |= self._recover(node)
        outcome["happened"] = outcome["recovered"] and (not failover or new_controller is not None)
        return outcome

    def _controller_other_than(self, node: int, timeout_s: float = 60.0) -> int | None:
        """The quorum's leader once it is not ``node`` (None if none after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            # No leader yet, or the tool gave up.
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                leader = active_controller(self.apache)
                if leader != node:
                    return leader
            time.sleep(0.5)
        return None

    def _recover(self, node: int) -> dict[str, Any]:
        """Supervise the query until ``node`` serves again and every replica is back in
        sync (or :data:`RECOVERY_S` passed); how long that took."""
        started = time.monotonic()
        deadline = started + RECOVERY_S
        while not self._background(lambda: serves(self.apache, node)):
            if time.monotonic() > deadline:
                return {"recovered": False, "recovery_s": round(time.monotonic() - started, 1)}
            self.pump(0.5)
        back = round(time.monotonic() - started, 1)
        self._background(lambda: self.apache.wait_ready(RECOVERY_S), RECOVERY_S + 30)
        lagging = self._background(lambda: out_of_sync(self.bootstrap))
        while lagging and time.monotonic() < deadline:
            self.pump(0.5)
            lagging = self._background(lambda: out_of_sync(self.bootstrap))
        return {
            "serving_after_s": back,
            "recovered": not lagging,
            "recovery_s": round(time.monotonic() - started, 1),
            **({"out_of_sync": lagging[:10]} if lagging else {}),
        }

    def _until(self, condition: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition() and time.monotonic() < deadline:
            self.pump(0.05)

    def _background(self, call: Callable[[], _T], timeout_s: float = 180.0) -> _T:
        """``call()`` on a thread while the query is supervised here; its result."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - re-raised on the harness's thread
                box["error"] = exc

        thread = threading.Thread(target=run, name="chaos-apache", daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout_s
        while thread.is_alive():
            if time.monotonic() > deadline:
                # A harness error, not the query's liveness: the cluster itself is stuck.
                raise RuntimeError(f"the cluster did not answer within {timeout_s:.0f} s")
            self.pump(0.2)
        if "error" in box:
            raise box["error"]
        value: _T = box["value"]
        return value
