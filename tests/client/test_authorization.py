"""Every request of the protocol client refused by an ACL raises ``AuthorizationError``
naming the operation Kafka checks for it and the resource, at once (never retried).

One SASL/PLAIN cluster with an authorizer: ``User:admin`` is a super user and manages the
ACLs; ``User:app`` gets, per case, everything the request path needs except one ACL, and
the case checks the error's operation, resource type and name, its request and that the
password is nowhere in it.
"""

from __future__ import annotations

import pickle
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from pyspark_kafka_txn.client.admin import (
    commit_offsets,
    create_topics,
    describe_broker_configs,
    fetch_offsets,
)
from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import (
    ProducerConfig,
    TransactionalProducer,
    end_transaction,
    end_transactions,
)
from pyspark_kafka_txn.client.security import SecurityConfig
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.errors import AuthorizationError, BrokerError
from pyspark_kafka_txn.wire import TopicPartition
from tests.support.acls import allow, replace_acls, secured_fixture
from tests.support.clients import sasl_conf

APP_PASSWORD = f"pw-{uuid.uuid4().hex[:12]}"
USERS = {"admin": "admin-pw", "app": APP_PASSWORD}
#: A hang detector: a refusal that were retried would take the whole retry budget.
HANG_S = 60.0
SECURITY = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "app",
    "sasl.password": APP_PASSWORD,
}


secured = secured_fixture(USERS)


@pytest.fixture(scope="module")
def topic(secured: EmbeddedKafka) -> str:
    name = f"authz-{uuid.uuid4().hex[:8]}"
    secured.create_topic(name, 1)
    return name


def _allow(rtype: ResourceType, name: str, op: AclOperation, prefixed: bool = False) -> AclBinding:
    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    return allow(rtype, name, op, "User:app", pattern)


def _grant(kafka: EmbeddedKafka, acls: list[AclBinding]) -> None:
    """Make ``acls`` the only ACLs of ``User:app``."""
    admin = AdminClient(sasl_conf(kafka.bootstrap_servers, "PLAIN", "admin", USERS["admin"]))
    replace_acls(admin, "User:app", acls)


def _cluster(kafka: EmbeddedKafka) -> ClusterClient:
    """``User:app``'s client, with a retry budget well above the hang detector."""
    config = ConnectionConfig(security=SecurityConfig.from_options(SECURITY))
    return ClusterClient(kafka.bootstrap_servers, config, retry_timeout_s=10 * HANG_S)


def _producer(cluster: ClusterClient, n: Names, tv: int = 2) -> TransactionalProducer:
    config = ProducerConfig.from_options(
        {
            "bootstrap.servers": n.bootstrap,
            "transactional.id": n.tid,
            "transaction.version": tv,
            **SECURITY,
        }
    )
    return TransactionalProducer(config, cluster)


def _denied(call: Callable[[], object]) -> AuthorizationError:
    began = time.monotonic()
    with pytest.raises(AuthorizationError) as raised:
        call()
    assert time.monotonic() - began < HANG_S, "the refusal was retried"
    error = raised.value
    assert not error.retriable
    assert APP_PASSWORD not in str(error)
    assert pickle.loads(pickle.dumps(error)).args == error.args
    return error


@dataclass(frozen=True)
class Names:
    """The resources of one case."""

    bootstrap: str
    topic: str
    tid: str
    group: str


def _names(kafka: EmbeddedKafka, topic: str) -> Names:
    uid = uuid.uuid4().hex[:8]
    return Names(kafka.bootstrap_servers, topic, f"tx-{uid}", f"tx-{uid}-group")


def _everything(n: Names) -> dict[str, AclBinding]:
    """All the transactional producer and the offset APIs need, by name."""
    return {
        "txn-write": _allow(ResourceType.TRANSACTIONAL_ID, n.tid, AclOperation.WRITE),
        "topic-write": _allow(ResourceType.TOPIC, n.topic, AclOperation.WRITE),
        "topic-read": _allow(ResourceType.TOPIC, n.topic, AclOperation.READ),
        "group-read": _allow(ResourceType.GROUP, n.group, AclOperation.READ),
    }


def _transaction(cluster: ClusterClient, n: Names, tv: int, *, offsets: bool) -> None:
    producer = _producer(cluster, n, tv)
    producer.init_transactions()
    producer.begin_transaction()
    try:
        producer.produce(n.topic, pa.array([b"v"]), partitions=0)
        if offsets:
            producer.send_offsets_to_transaction({TopicPartition(n.topic, 0): 1}, n.group, "m")
        producer.flush()
    except BaseException:
        producer.abort_transaction()
        raise
    producer.commit_transaction()


# (what is refused, ACLs to drop and add, the call, expected (operation, type, name) and
# the request named). ``n`` gives the names of the case.
CASES: dict[
    str,
    tuple[
        Callable[[Names], tuple[list[str], list[AclBinding]]],
        Callable[[ClusterClient, Names], object],
        Callable[[Names], tuple[str, str, str]],
        str,
    ],
] = {
    "FindCoordinator(transaction) without any TransactionalId ACL": (
        lambda n: (["txn-write"], []),
        lambda c, n: _producer(c, n).init_transactions(),
        lambda n: ("DESCRIBE", "TransactionalId", n.tid),
        "FindCoordinator",
    ),
    "InitProducerId with Describe only": (
        lambda n: (
            ["txn-write"],
            [_allow(ResourceType.TRANSACTIONAL_ID, n.tid, AclOperation.DESCRIBE)],
        ),
        lambda c, n: _producer(c, n).init_transactions(),
        lambda n: ("WRITE", "TransactionalId", n.tid),
        "InitProducerId",
    ),
    "Metadata without Describe on the topic": (
        lambda n: (["topic-write", "topic-read"], []),
        lambda c, n: c.topic(n.topic),
        lambda n: ("DESCRIBE", "Topic", n.topic),
        "Metadata",
    ),
    "Produce (TV2) without Write on the topic": (
        lambda n: (["topic-write"], []),
        lambda c, n: _transaction(c, n, 2, offsets=False),
        lambda n: ("WRITE", "Topic", n.topic),
        "Produce to",
    ),
    "AddPartitionsToTxn (TV1) without Write on the topic": (
        lambda n: (["topic-write"], []),
        lambda c, n: _transaction(c, n, 1, offsets=False),
        lambda n: ("WRITE", "Topic", n.topic),
        "AddPartitionsToTxn",
    ),
    "FindCoordinator(group) without any Group ACL": (
        lambda n: (["group-read"], []),
        lambda c, n: _transaction(c, n, 2, offsets=True),
        lambda n: ("DESCRIBE", "Group", n.group),
        "FindCoordinator",
    ),
    "AddOffsetsToTxn (TV1) with Describe only on the group": (
        lambda n: (["group-read"], [_allow(ResourceType.GROUP, n.group, AclOperation.DESCRIBE)]),
        lambda c, n: _transaction(c, n, 1, offsets=True),
        lambda n: ("READ", "Group", n.group),
        "AddOffsetsToTxn",
    ),
    "TxnOffsetCommit (TV2) with Describe only on the group": (
        lambda n: (["group-read"], [_allow(ResourceType.GROUP, n.group, AclOperation.DESCRIBE)]),
        lambda c, n: _transaction(c, n, 2, offsets=True),
        lambda n: ("READ", "Group", n.group),
        "TxnOffsetCommit",
    ),
    "TxnOffsetCommit without Read on the topic": (
        lambda n: (["topic-read"], []),
        lambda c, n: _transaction(c, n, 2, offsets=True),
        lambda n: ("READ", "Topic", n.topic),
        "TxnOffsetCommit",
    ),
    "OffsetCommit with Describe only on the group": (
        lambda n: (["group-read"], [_allow(ResourceType.GROUP, n.group, AclOperation.DESCRIBE)]),
        lambda c, n: commit_offsets(c, n.group, {TopicPartition(n.topic, 0): (1, "m")}),
        lambda n: ("READ", "Group", n.group),
        "OffsetCommit",
    ),
    "OffsetCommit without Read on the topic": (
        lambda n: (["topic-read"], []),
        lambda c, n: commit_offsets(c, n.group, {TopicPartition(n.topic, 0): (1, "m")}),
        lambda n: ("READ", "Topic", n.topic),
        "OffsetCommit",
    ),
    "OffsetFetch of a topic the principal may not describe": (
        lambda n: (["topic-read", "topic-write"], []),
        lambda c, n: fetch_offsets(c, n.group, [TopicPartition(n.topic, 0)], require_stable=False),
        lambda n: ("DESCRIBE", "Topic", n.topic),
        "OffsetFetch",
    ),
    "DescribeConfigs without DescribeConfigs on the cluster": (
        lambda n: ([], []),
        lambda c, n: describe_broker_configs(c, ["transaction.max.timeout.ms"]),
        lambda n: ("DESCRIBE_CONFIGS", "Cluster", "kafka-cluster"),
        "DescribeConfigs",
    ),
    "CreateTopics without Create": (
        lambda n: ([], []),
        lambda c, n: create_topics(c, {f"{n.topic}-new": 1}),
        lambda n: ("CREATE", "Topic", f"{n.topic}-new"),
        "CreateTopics",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_request_names_the_operation_and_the_resource(
    secured: EmbeddedKafka, topic: str, case: str
) -> None:
    change, call, expected, request = CASES[case]
    names = _names(secured, topic)
    drop, add = change(names)
    acls = _everything(names)
    _grant(secured, [a for k, a in acls.items() if k not in drop] + add)
    with _cluster(secured) as cluster:
        error = _denied(lambda: call(cluster, names))
    operation, rtype, name = expected(names)
    assert (error.operation, error.resource_type, error.resource_name) == (operation, rtype, name)
    assert error.context.startswith(request)
    assert f"not authorized: {operation} on {rtype} '{name}' ({request}" in str(error)


def test_end_txn_refused_after_prepare(secured: EmbeddedKafka, topic: str) -> None:
    """Write taken away (Describe left) between prepare and EndTxn: ``end_transaction``
    raises it, ``end_transactions`` reports it for the id; with Write back the prepared
    transaction still commits."""
    names = _names(secured, topic)
    acls = _everything(names)
    _grant(secured, list(acls.values()))
    with _cluster(secured) as cluster:
        producer = _producer(cluster, names)
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce(names.topic, pa.array([b"v"]), partitions=0)
        handle = producer.prepare()
        describe = _allow(ResourceType.TRANSACTIONAL_ID, names.tid, AclOperation.DESCRIBE)
        _grant(secured, [a for k, a in acls.items() if k != "txn-write"] + [describe])
        error = _denied(lambda: end_transaction(cluster, handle, commit=True))
        assert (error.operation, error.resource_type, error.resource_name) == (
            "WRITE",
            "TransactionalId",
            names.tid,
        )
        [result] = end_transactions(cluster, [handle], commit=True).values()
        assert isinstance(result, AuthorizationError)
        assert result.resource_name == names.tid
        _grant(secured, list(acls.values()))
        assert end_transaction(cluster, handle, commit=True)[0] == handle.producer_id


def test_with_hint_keeps_the_refusal_and_adds_the_acl(secured: EmbeddedKafka) -> None:
    _grant(secured, [])
    with _cluster(secured) as cluster:
        error = _denied(lambda: describe_broker_configs(cluster, ["x"]))
    hinted = error.with_hint("needs an ACL such as: --operation DescribeConfigs --cluster")
    assert isinstance(hinted, BrokerError)
    assert (hinted.code, hinted.operation, hinted.resource_name) == (
        error.code,
        error.operation,
        error.resource_name,
    )
    assert str(hinted) == f"{error}; needs an ACL such as: --operation DescribeConfigs --cluster"
