"""A seeded fault schedule: which faults, when, on what cluster shape.

Everything random in a chaos run is drawn here from the seed, so a seed, a duration and a
target (the embedded cluster or Apache Kafka) reproduce a run's plan (not its timing: Spark
and the machine decide that). Each target has its own fault kinds: the embedded cluster
can answer a chosen error code, move leaders and coordinators on request and start its
producer epochs near exhaustion; Apache Kafka can be killed, hung and failed over node by
node, and its request faults come from the proxies in front of its nodes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

#: Fault kinds and their weights.
KINDS: dict[str, int] = {
    "task_exception": 2,  # the first attempt of a writing task raises
    "worker_kill": 2,  # the first attempt of a writing task kills its Python worker
    "driver_kill": 2,  # SIGKILL of the whole Spark process at a random moment
    "driver_kill_after_decision": 3,  # EndTxn held back, then SIGKILL: inside commit()
    "driver_kill_before_decision": 2,  # OffsetCommit (the decision) failing, then SIGKILL
    "broker_restart": 2,  # the whole cluster restarted from its data directory
    "drop_connections": 2,  # every client connection cut
    "retriable_errors": 3,  # a few requests answered with a retriable error
    "lost_responses": 2,  # requests executed, their answers lost
    "delays": 2,  # requests held back
    "leader_move": 2,  # (3 brokers) a partition's leadership moves
    "coordinator_move": 2,  # (3 brokers) a transaction coordinator moves
    "input_txn_timeout": 2,  # an input producer stalls until the broker aborts its transaction
    "output_txn_timeout": 4,  # EndTxn held back until the writer's transactions time out
}
#: Fault kinds on a three-node Apache Kafka cluster and their weights. Faults Kafka cannot
#: produce (an error code chosen by the test, a moved leader or coordinator on request)
#: have no place here; the proxies in front of the nodes hold, delay and lose requests.
APACHE_KINDS: dict[str, int] = {
    "task_exception": 2,
    "worker_kill": 2,
    "driver_kill": 2,
    "driver_kill_after_decision": 3,  # EndTxn held by the proxies, then SIGKILL
    "driver_kill_before_decision": 2,  # OffsetCommit (the decision) held, then SIGKILL
    "node_kill": 4,  # kill -9 of the output leader's or a writer coordinator's node, restart
    "node_pause": 2,  # SIGSTOP of such a node for some seconds, then SIGCONT
    "controller_kill": 2,  # kill -9 of the active KRaft controller, then restart
    "drop_connections": 2,  # every connection through the proxies cut
    "lost_responses": 2,  # requests executed, their connection cut before the answer
    "delays": 2,  # requests held back by the proxies
    "input_txn_timeout": 2,
    "output_txn_timeout": 4,  # EndTxn held until the broker aborts the writer's transactions
}
#: The targets a plan can be drawn for.
TARGETS = ("embedded", "apache")
#: Apache Kafka plans run on three nodes.
APACHE_NODES = 3
#: The nodes a ``node_kill`` or ``node_pause`` hits: the leader of an output partition,
#: or the transaction coordinator of one of the writer's transactional ids.
NODE_ROLES = ("output_leader", "txn_coordinator")
MULTI_BROKER_ONLY = {"leader_move", "coordinator_move"}
#: Kinds that need the writer's transactions to expire (no KIP-939 two-phase commit).
TIMEOUT_ONLY = {"output_txn_timeout"}
#: The writer's ``kafka.transaction.timeout.ms`` in plans drawn with expiring transactions.
WRITER_TXN_TIMEOUT_MS = 10_000

#: Multi-query plans (``queries > 1``): the faults of each target that can be aimed at the
#: query under test alone (its records, its process, its transactional ids and groups,
#: its proxies); a whole-cluster fault (a restart, every connection cut, a moved leader,
#: a node killed) would hit its neighbours too.
MULTI_KINDS = {
    "embedded": (
        "task_exception",
        "worker_kill",
        "driver_kill",
        "driver_kill_after_decision",
        "driver_kill_before_decision",
        "retriable_errors",
        "lost_responses",
        "delays",
        "coordinator_move",
        "input_txn_timeout",
        "output_txn_timeout",
    ),
    "apache": (
        "task_exception",
        "worker_kill",
        "driver_kill",
        "driver_kill_after_decision",
        "driver_kill_before_decision",
        "drop_connections",
        "lost_responses",
        "delays",
        "input_txn_timeout",
        "output_txn_timeout",
    ),
}
#: On the embedded cluster a request is aimed by its transactional id (or group id): in
#: multi-query plans only APIs that carry one of the query's.
AIMABLE_APIS = {
    "Produce",
    "EndTxn",
    "InitProducerId",
    "TxnOffsetCommit",
    "OffsetCommit",
}

RETRIABLE = [
    ("Produce", "NOT_LEADER_OR_FOLLOWER"),
    ("Produce", "REQUEST_TIMED_OUT"),
    ("EndTxn", "COORDINATOR_LOAD_IN_PROGRESS"),
    ("EndTxn", "CONCURRENT_TRANSACTIONS"),
    ("InitProducerId", "CONCURRENT_TRANSACTIONS"),
    ("InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS"),
    ("FindCoordinator", "COORDINATOR_NOT_AVAILABLE"),
    ("TxnOffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS"),
    ("OffsetFetch", "COORDINATOR_LOAD_IN_PROGRESS"),
    ("Fetch", "NOT_LEADER_OR_FOLLOWER"),
    ("ListOffsets", "NOT_LEADER_OR_FOLLOWER"),
]
LOSABLE = ["Produce", "EndTxn", "InitProducerId", "TxnOffsetCommit", "OffsetCommit"]
DELAYABLE = ["Produce", "EndTxn", "InitProducerId", "Fetch", "OffsetFetch", "ListOffsets"]


@dataclass(frozen=True, slots=True)
class Fault:
    at_s: float  # seconds after the input producer started
    kind: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Plan:
    seed: int
    duration_s: float
    brokers: int
    input_partitions: int
    output_partitions: int
    #: Spark partitions of each run of the query (a restart takes the next one).
    repartitions: tuple[int, ...]
    #: The embedded cluster's first producer epoch (near 32767: epochs cross exhaustion).
    initial_producer_epoch: int
    faults: tuple[Fault, ...]
    #: Independent transactional producers writing the input at the same time.
    input_producers: int = 1
    #: The writer's transaction timeout with two-phase commit off (its transactions can
    #: expire), or ``None``: KIP-939 two-phase commit, prepared transactions never expire
    #: (on a broker without KIP-939: the writer's default timeout, 15 min).
    writer_txn_timeout_ms: int | None = None
    #: The cluster the plan was drawn for: ``embedded`` or ``apache``.
    target: str = "embedded"
    #: Apache Kafka: the ``transaction.version`` its cluster is formatted with.
    transaction_version: int | None = None
    #: Apache Kafka started with KIP-939 on (``transaction.two.phase.commit.enable`` and
    #: ``unstable.api.versions.enable``): the writer keeps its default ``auto`` mode even
    #: where ``writer_txn_timeout_ms`` is set, so its transactions never expire.
    broker_two_phase: bool = False
    #: Streaming queries side by side; the faults hit the first one only.
    queries: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def draw(
    seed: int,
    duration_s: float,
    target: str = "embedded",
    kinds: Sequence[str] | None = None,
    queries: int = 1,
    *,
    broker_two_phase: bool = False,
) -> Plan:
    """The plan of ``seed`` for ``target``.

    Parameters
    ----------
    seed
        Everything random in the plan comes from it.
    duration_s
        Seconds of input; the faults fall in its first three quarters.
    target
        ``embedded`` (1 or 3 brokers, the faults of :data:`KINDS`) or ``apache`` (three
        nodes, the faults of :data:`APACHE_KINDS`).
    kinds
        A fixed fault list instead of the drawn one: these kinds in this order, evenly
        spaced in time, their parameters still drawn from the seed (a kind the plan's
        cluster cannot produce is refused).
    queries
        Streaming queries side by side (:data:`MULTI_KINDS`): above 1 the faults are only
        those that can hit the first query alone (the same seed draws another plan).
    broker_two_phase
        ``apache`` only: the brokers run with KIP-939 two-phase commit on (the same draw
        otherwise; the writer's transactions then never expire, so the
        ``output_txn_timeout`` faults must be harmless).

    Returns
    -------
    Plan
        The cluster shape, the query's settings and the faults.

    Raises
    ------
    ValueError
        For an unknown target, or a fixed kind the target cannot produce.
    """
    if queries < 1:
        raise ValueError(f"queries must be at least 1, got {queries}")
    if target == "apache":
        return replace(
            _draw_apache(seed, duration_s, kinds, queries), broker_two_phase=broker_two_phase
        )
    if broker_two_phase:
        raise ValueError(
            "broker_two_phase is for the apache target (the embedded cluster's "
            "plans without expiring transactions use two-phase commit already)"
        )
    if target != "embedded":
        raise ValueError(f"unknown target {target!r}: one of {', '.join(TARGETS)}")
    rng = random.Random(seed if queries == 1 else f"multi-{queries}-{seed}")
    brokers = rng.choice([1, 3])
    expiring = rng.random() < 0.4 or bool(kinds and TIMEOUT_ONLY & set(kinds))
    allowed = [
        k
        for k in KINDS
        if (brokers > 1 or k not in MULTI_BROKER_ONLY)
        and (expiring or k not in TIMEOUT_ONLY)
        and (queries == 1 or k in MULTI_KINDS[target])
    ]
    # About one fault every 6 s, none in the last quarter (the query must catch up).
    count = len(kinds) if kinds else max(2, round(duration_s / 6))
    faults = _faults(rng, KINDS, allowed, count, duration_s, brokers, kinds, queries > 1)
    return Plan(
        seed=seed,
        duration_s=duration_s,
        brokers=brokers,
        input_partitions=rng.randint(2, 4),
        output_partitions=rng.randint(2, 4),
        repartitions=tuple(rng.randint(2, 5) for _ in range(1 + count)),
        initial_producer_epoch=32_760 if rng.random() < 0.3 else 0,
        faults=faults,
        input_producers=rng.randint(1, 3),
        writer_txn_timeout_ms=WRITER_TXN_TIMEOUT_MS if expiring else None,
        queries=queries,
    )


def _draw_apache(seed: int, duration_s: float, kinds: Sequence[str] | None, queries: int) -> Plan:
    rng = random.Random(f"apache-{seed}" if queries == 1 else f"apache-multi-{queries}-{seed}")
    expiring = rng.random() < 0.4 or bool(kinds and TIMEOUT_ONLY & set(kinds))
    allowed = [
        k
        for k in APACHE_KINDS
        if (expiring or k not in TIMEOUT_ONLY) and (queries == 1 or k in MULTI_KINDS["apache"])
    ]
    count = len(kinds) if kinds else max(2, round(duration_s / 6))
    faults = _faults(rng, APACHE_KINDS, allowed, count, duration_s, APACHE_NODES, kinds, False)
    return Plan(
        seed=seed,
        duration_s=duration_s,
        brokers=APACHE_NODES,
        input_partitions=rng.randint(2, 4),
        output_partitions=rng.randint(2, 4),
        repartitions=tuple(rng.randint(2, 5) for _ in range(1 + count)),
        initial_producer_epoch=0,  # Kafka has no setting to start epochs elsewhere
        faults=faults,
        input_producers=rng.randint(1, 3),
        writer_txn_timeout_ms=WRITER_TXN_TIMEOUT_MS if expiring else None,
        target="apache",
        transaction_version=rng.choice([1, 2]),
        queries=queries,
    )


def _faults(
    rng: random.Random,
    weighted: dict[str, int],
    allowed: list[str],
    count: int,
    duration_s: float,
    brokers: int,
    fixed: Sequence[str] | None,
    aimed: bool,
) -> tuple[Fault, ...]:
    faults = []
    if fixed:
        refused = [k for k in fixed if k not in allowed]
        if refused:
            raise ValueError(f"fault kinds {refused} are not among this target's: {allowed}")
        for i, kind in enumerate(fixed):
            at = round(duration_s * 0.75 * (i + 1) / (len(fixed) + 1), 1)
            faults.append(Fault(at, kind, _params(rng, kind, brokers, aimed)))
        return tuple(faults)
    weights = [weighted[k] for k in allowed]
    for _ in range(count):
        kind = rng.choices(allowed, weights)[0]
        at = round(rng.uniform(2.0, duration_s * 0.75), 1)
        faults.append(Fault(at, kind, _params(rng, kind, brokers, aimed)))
    faults.sort(key=lambda f: f.at_s)
    return tuple(faults)


def _params(rng: random.Random, kind: str, brokers: int, aimed: bool) -> dict[str, Any]:
    """A fault's parameters; ``aimed``: only requests the embedded cluster can aim at one
    query (:data:`AIMABLE_APIS`)."""

    def some(apis: list[Any], api: Any = lambda a: a) -> Any:
        return rng.choice([a for a in apis if not aimed or api(a) in AIMABLE_APIS])

    if kind == "retriable_errors":
        api, error = some(RETRIABLE, lambda a: a[0])
        return {"api": api, "error": error, "count": rng.randint(1, 5)}
    if kind == "lost_responses":
        return {"api": some(LOSABLE), "count": rng.randint(1, 3)}
    if kind == "delays":
        return {
            "api": some(DELAYABLE),
            "seconds": round(rng.uniform(0.2, 3.0), 1),
            "count": rng.randint(1, 4),
        }
    if kind == "leader_move":
        return {
            "output": rng.random() < 0.5,
            "partition": rng.randint(0, 3),
            "node": rng.randrange(brokers),
        }
    if kind == "coordinator_move":
        return {
            "writer": rng.random() < 0.7 or aimed,
            "partition": rng.randint(0, 4),
            "node": rng.randrange(brokers),
        }
    if kind == "driver_kill":
        return {"delay_s": round(rng.uniform(0.0, 1.5), 2)}
    if kind == "input_txn_timeout":
        return {"records": rng.randint(1, 60), "timeout_ms": rng.choice([1000, 2000, 4000])}
    if kind == "node_kill":
        return {
            "node": rng.choice(NODE_ROLES),
            "partition": rng.randint(0, 4),
            "down_s": round(rng.uniform(0.5, 12.0), 1),
        }
    if kind == "node_pause":
        return {
            "node": rng.choice(NODE_ROLES),
            "partition": rng.randint(0, 4),
            "seconds": round(rng.uniform(2.0, 12.0), 1),
        }
    if kind == "controller_kill":
        return {"down_s": round(rng.uniform(0.5, 12.0), 1)}
    return {}
