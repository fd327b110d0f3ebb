"""ACLs on the embedded cluster: CreateAcls/DescribeAcls/DeleteAcls and the
transactional APIs under KIP-98's TransactionalId ACLs.

Through librdkafka's and the Java client's admin (ACL CRUD), and librdkafka's,
aiokafka's, the Java client's and our own transactional producers: a producer without
WRITE on its transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, with it (literal
or prefixed) it commits; a principal allowed prefix ``a-`` can neither start nor fence a
transaction of prefix ``b-``; idempotent producers need IDEMPOTENT_WRITE on the cluster
or WRITE on some topic; Metadata hides what the principal may not describe; ACLs
survive a restart.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TransactionalIdAuthorizationFailed
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from cryptography import x509
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pyspark_kafka_txn.client.producer import (
    ProducerConfig,
    TransactionalProducer,
    end_transaction,
)
from pyspark_kafka_txn.client.security import SecurityConfig
from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import AuthorizationError, BrokerError
from tests.broker.java_client import JavaClient, JavaClientError
from tests.support.acls import (
    allow,
    authorizer_settings,
    binding_filter,
    principal_filter,
    secured_fixture,
)
from tests.support.clients import consume_messages, first_address, sasl_conf
from tests.support.clusters import CheckedKafka
from tests.support.protocol import raw_request
from tests.support.tls import tls_files

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
HANG_S = 60.0  # hang detector, never a timing assertion
ANY_FILTER = principal_filter(None)


secured = secured_fixture(USERS)


def _conf(kafka: EmbeddedKafka, user: str) -> dict[str, Any]:
    return dict(sasl_conf(kafka.bootstrap_servers, "PLAIN", user, USERS[user]))


def _admin(kafka: EmbeddedKafka, user: str = "admin") -> AdminClient:
    return AdminClient(_conf(kafka, user))


def _acl(
    rtype: ResourceType,
    name: str,
    principal: str,
    op: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return allow(rtype, name, op, principal, pattern, permission)


def _create(kafka: EmbeddedKafka, *acls: AclBinding) -> None:
    admin = _admin(kafka)  # referenced until the futures complete
    for future in admin.create_acls(list(acls), request_timeout=30).values():
        future.result(30)


def _delete(kafka: EmbeddedKafka, *acls: AclBinding) -> None:
    filters = [binding_filter(a) for a in acls]
    admin = _admin(kafka)
    for future in admin.delete_acls(filters, request_timeout=30).values():
        assert future.result(30), "the ACL to delete was not found"


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _kafka_error(call: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        call()
    error = raised.value.args[0]
    assert isinstance(error, KafkaError)
    return error


def _committed_values(kafka: EmbeddedKafka, topic: str) -> list[bytes]:
    """Every read_committed value of partition 0, read by the super user to the end (the
    LSO), within the shared reader's hang detector."""
    messages = consume_messages(kafka.bootstrap_servers, topic, 1, **_conf(kafka, "admin"))
    return [m.value() or b"" for m in messages]


# --- ACL CRUD ---------------------------------------------------------------------


def test_acl_apis_answer_security_disabled_without_an_authorizer() -> None:
    with CheckedKafka() as plain:
        admin = AdminClient({"bootstrap.servers": plain.bootstrap_servers})
        acl = _acl(ResourceType.TOPIC, "t", "User:x", AclOperation.READ)
        future = admin.create_acls([acl], request_timeout=30)[acl]
        error = _kafka_error(lambda: future.result(30))
        assert error.code() == KafkaError.SECURITY_DISABLED
        assert error.str() == "No Authorizer is configured."
        # librdkafka's describe_acls drops the top-level error: the raw answer shows it.
        mod: Any = load_payload_module(29, 3, EntityType.request)
        body = mod.DescribeAclsRequest(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        answer = raw_request(first_address(plain.bootstrap_servers), 29, 3, body)
        assert answer.error_code == ErrorCode.security_disabled
        assert answer.resources == ()


def test_acls_created_described_and_deleted_by_librdkafka_and_java(
    secured: EmbeddedKafka,
) -> None:
    principal = f"User:{_name('crud-')}"
    literal = _acl(ResourceType.TOPIC, "orders", principal, AclOperation.READ)
    prefixed = _acl(
        ResourceType.TRANSACTIONAL_ID,
        "etl-",
        principal,
        AclOperation.WRITE,
        ResourcePatternType.PREFIXED,
    )
    denied = _acl(
        ResourceType.GROUP,
        "*",
        principal,
        AclOperation.ALL,
        permission=AclPermissionType.DENY,
    )
    _create(secured, literal, prefixed, denied)
    _create(secured, literal)  # creating an existing ACL changes nothing
    admin = _admin(secured)
    mine = principal_filter(principal)
    assert set(admin.describe_acls(mine, request_timeout=30).result(30)) == {
        literal,
        prefixed,
        denied,
    }
    # MATCH: the ACLs that apply to one resource name (its literal, the wildcard, prefixes).
    match = AclBindingFilter(
        ResourceType.TRANSACTIONAL_ID,
        "etl-7",
        ResourcePatternType.MATCH,
        principal,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(match, request_timeout=30).result(30) == [prefixed]

    java = JavaClient(secured.bootstrap_servers, *_java_sasl("admin"))
    try:
        java.call("createacl", "CLUSTER", "kafka-cluster", "LITERAL", principal, "*",
                  "IDEMPOTENT_WRITE", "ALLOW")  # fmt: skip
        rows = [row for row in java.call("describeacls") if row[3] == principal]
        assert sorted(rows) == sorted(
            [
                ["TOPIC", "orders", "LITERAL", principal, "*", "READ", "ALLOW"],
                ["TRANSACTIONAL_ID", "etl-", "PREFIXED", principal, "*", "WRITE", "ALLOW"],
                ["GROUP", "*", "LITERAL", principal, "*", "ALL", "DENY"],
                ["CLUSTER", "kafka-cluster", "LITERAL", principal, "*", "IDEMPOTENT_WRITE",
                 "ALLOW"],
            ]
        )  # fmt: skip
        assert java.call("deleteacls", "TRANSACTIONAL_ID", "etl-", "PREFIXED") == 1
        assert java.call("deleteacls", "TRANSACTIONAL_ID", "etl-", "PREFIXED") == 0
        # An invalid ACL is refused by the broker with the reason.
        with pytest.raises(JavaClientError) as refused:
            java.call("createacl", "CLUSTER", "other-cluster", "LITERAL", principal, "*",
                      "ALTER", "ALLOW")  # fmt: skip
        assert refused.value.error == "InvalidRequestException"
        assert "kafka-cluster" in str(refused.value)
    finally:
        java.close()
    # librdkafka sees the Java client's change, and deletes by filter.
    remaining = admin.describe_acls(mine, request_timeout=30).result(30)
    assert prefixed not in remaining and literal in remaining and len(remaining) == 3
    deleted = admin.delete_acls([mine], request_timeout=30)[mine].result(30)
    assert len(deleted) == 3
    assert admin.describe_acls(mine, request_timeout=30).result(30) == []


def test_only_principals_allowed_on_the_cluster_manage_acls(secured: EmbeddedKafka) -> None:
    alice = _admin(secured, "alice")
    acl = _acl(ResourceType.TOPIC, "x", "User:alice", AclOperation.ALL)
    future = alice.create_acls([acl], request_timeout=30)[acl]
    assert _kafka_error(lambda: future.result(30)).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    java = JavaClient(secured.bootstrap_servers, *_java_sasl("alice"))
    try:
        with pytest.raises(JavaClientError) as refused:
            java.call("describeacls")
        assert refused.value.error == "ClusterAuthorizationException"
        with pytest.raises(JavaClientError) as refused:
            java.call("deleteacls", "TOPIC", "x", "LITERAL")
        assert refused.value.error == "ClusterAuthorizationException"
    finally:
        java.close()
    assert acl not in _admin(secured).describe_acls(ANY_FILTER, request_timeout=30).result(30)


# --- transactional ids --------------------------------------------------------------


def test_transactional_apis_need_their_acls_librdkafka(secured: EmbeddedKafka) -> None:
    """InitProducerId needs WRITE on the transactional id, AddPartitionsToTxn WRITE on
    the topic, AddOffsetsToTxn READ on the group, EndTxn WRITE on the id again; each
    refusal leaves nothing visible."""
    topic, tid, group = _name("txn-"), _name("tx-"), _name("g-")
    secured.create_topic(topic, 1)
    describe = _acl(ResourceType.TRANSACTIONAL_ID, tid, "User:alice", AclOperation.DESCRIBE)
    _create(secured, describe)  # FindCoordinator passes; InitProducerId must not
    producer = Producer({**_conf(secured, "alice"), "transactional.id": tid})
    error = _kafka_error(lambda: producer.init_transactions(30))
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    write_id = _acl(ResourceType.TRANSACTIONAL_ID, tid, "User:alice", AclOperation.WRITE)
    # DESCRIBE on the topic: its metadata is known, writing to it is not allowed yet.
    _create(secured, write_id, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE))
    producer = Producer({**_conf(secured, "alice"), "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"refused")
    error = _kafka_error(lambda: producer.commit_transaction(30))
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Nothing was added to the transaction, so the abort's EndTxn finds it empty and
    # gets INVALID_TXN_STATE (as from Kafka): librdkafka makes that fatal.
    assert _kafka_error(lambda: producer.abort_transaction(30)).fatal()

    _create(secured, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE))
    producer = Producer({**_conf(secured, "alice"), "transactional.id": tid})
    producer.init_transactions(30)
    meta = Consumer({**_conf(secured, "admin"), "group.id": group}).consumer_group_metadata()

    def refused_offsets(value: bytes) -> KafkaError:
        """A transaction writing ``value`` whose offsets are refused; then aborted."""
        producer.begin_transaction()
        producer.produce(topic, value)
        error = _kafka_error(
            lambda: producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], meta, 30)
        )
        producer.abort_transaction(30)
        return error

    assert refused_offsets(b"kept").code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # READ on the group: AddOffsetsToTxn passes, TxnOffsetCommit still needs READ on
    # the topic whose offsets it commits.
    _create(secured, _acl(ResourceType.GROUP, group, "User:alice", AclOperation.READ))
    assert refused_offsets(b"kept-too").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    _create(secured, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ))
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], meta, 30)
    producer.commit_transaction(30)

    # Losing WRITE on the id mid-transaction: EndTxn is refused, nothing is visible.
    producer.begin_transaction()
    producer.produce(topic, b"never")
    producer.flush(30)
    _delete(secured, write_id)
    error = _kafka_error(lambda: producer.commit_transaction(30))
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert _committed_values(secured, topic) == [b"committed"]


def _our_producer_config(kafka: EmbeddedKafka, user: str, tid: str) -> ProducerConfig:
    security = SecurityConfig.from_options(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
        }
    )
    return ProducerConfig(kafka.bootstrap_servers, tid, security=security)


def _our_producer(kafka: EmbeddedKafka, user: str, tid: str) -> TransactionalProducer:
    return TransactionalProducer(_our_producer_config(kafka, user, tid))


def _aiokafka_init(kafka: EmbeddedKafka, user: str, tid: str) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap_servers,
            transactional_id=tid,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=user,
            sasl_plain_password=USERS[user],
        )
        try:
            await producer.start()
        finally:
            await producer.stop()

    asyncio.run(run())


def _own_prefixes(kafka: EmbeddedKafka, kind: str, *writers: str) -> tuple[str, str]:
    """A new run id and 1-partition topic; alice may WRITE the transactional ids
    ``a-{run}-*``, bob ``b-{run}-*``, and ``writers`` the topic.

    Returns
    -------
    tuple
        The run id and the topic.
    """
    run = uuid.uuid4().hex[:6]
    topic = _name(kind)
    kafka.create_topic(topic, 1)
    _create(
        kafka,
        _acl(ResourceType.TRANSACTIONAL_ID, f"a-{run}-", "User:alice", AclOperation.WRITE,
             ResourcePatternType.PREFIXED),
        _acl(ResourceType.TRANSACTIONAL_ID, f"b-{run}-", "User:bob", AclOperation.WRITE,
             ResourcePatternType.PREFIXED),
        *(_acl(ResourceType.TOPIC, topic, f"User:{user}", AclOperation.WRITE) for user in writers),
    )  # fmt: skip
    return run, topic


def test_prefix_acl_keeps_a_principal_to_its_own_transactional_ids(
    secured: EmbeddedKafka,
) -> None:
    """Alice may WRITE transactional ids ``a-*``: she commits as ``a-...`` through every
    client, and can neither start nor fence a transaction of ``b-...`` (bob's)."""
    run, topic = _own_prefixes(secured, "prefix-", "alice", "bob")
    # Bob holds an open transaction on b-...-1.
    victim = f"b-{run}-1"
    bob = Producer({**_conf(secured, "bob"), "transactional.id": victim})
    bob.init_transactions(30)
    bob.begin_transaction()
    bob.produce(topic, b"bob")
    bob.flush(30)

    # Alice through librdkafka, aiokafka, our client and the Java client.
    mine = Producer({**_conf(secured, "alice"), "transactional.id": f"a-{run}-1"})
    mine.init_transactions(30)
    mine.begin_transaction()
    mine.produce(topic, b"alice")
    mine.commit_transaction(30)
    intruder = Producer({**_conf(secured, "alice"), "transactional.id": victim})
    error = _kafka_error(lambda: intruder.init_transactions(30))
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert error.fatal()

    _aiokafka_init(secured, "alice", f"a-{run}-2")
    with pytest.raises(TransactionalIdAuthorizationFailed):
        _aiokafka_init(secured, "alice", victim)

    with _our_producer(secured, "alice", f"a-{run}-3") as ours:
        ours.init_transactions()
    with _our_producer(secured, "alice", victim) as ours, pytest.raises(BrokerError) as denied:
        ours.init_transactions()
    assert denied.value.code.name == "transactional_id_authorization_failed"

    java = JavaClient(secured.bootstrap_servers)
    sasl = _java_sasl("alice")
    try:
        java.call("producer", "ok", f"a-{run}-4", *sasl)
        java.call("init", "ok")
        java.call("producer", "bad", victim, *sasl)
        with pytest.raises(JavaClientError) as refused:
            java.call("init", "bad")
        assert refused.value.error == "TransactionalIdAuthorizationException"
    finally:
        java.close()

    # None of it fenced bob: his transaction still commits.
    bob.commit_transaction(30)
    assert sorted(_committed_values(secured, topic)) == [b"alice", b"bob"]


def _java_sasl(user: str) -> tuple[str, ...]:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{USERS[user]}";'
    )
    return ("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", f"sasl.jaas.config={jaas}")


# --- idempotence, metadata, persistence -----------------------------------------------


def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(
    secured: EmbeddedKafka,
) -> None:
    topic = _name("idem-")
    secured.create_topic(topic, 1)

    def produce_one(user: str) -> KafkaError | None:
        errors: list[KafkaError] = []
        delivered: list[Any] = []
        producer = Producer(
            {
                **_conf(secured, user),
                "enable.idempotence": True,
                "error_cb": errors.append,
            }
        )
        try:
            producer.produce(topic, b"x", on_delivery=lambda err, _m: delivered.append(err))
            deadline = time.monotonic() + HANG_S
            while not delivered and not any(e.fatal() for e in errors):
                assert time.monotonic() < deadline, "neither delivered nor refused"
                producer.poll(0.1)
        except KafkaException as exc:  # a fatal error surfaces from the next call
            errors.append(exc.args[0])
        fatal = [e for e in errors if e.fatal()]
        return fatal[0] if fatal else delivered[0]

    # DESCRIBE on the topic (its metadata is known) but no right to write anything.
    _create(secured, _acl(ResourceType.TOPIC, topic, "User:carol", AclOperation.DESCRIBE))
    error = produce_one("carol")
    assert error is not None and error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # WRITE on any topic is enough for InitProducerId (KIP-679), but the record goes to
    # `topic`, which needs WRITE itself.
    other = _name("other-")
    _create(secured, _acl(ResourceType.TOPIC, other, "User:carol", AclOperation.WRITE))
    error = produce_one("carol")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _create(secured, _acl(ResourceType.TOPIC, topic, "User:carol", AclOperation.WRITE))
    assert produce_one("carol") is None


def test_metadata_hides_topics_the_principal_may_not_describe(secured: EmbeddedKafka) -> None:
    visible, hidden = _name("vis-"), _name("hid-")
    secured.create_topic(visible, 1)
    secured.create_topic(hidden, 1)
    _create(secured, _acl(ResourceType.TOPIC, visible, "User:bob", AclOperation.READ))
    bob = _admin(secured, "bob")
    listed = bob.list_topics(timeout=30).topics
    assert visible in listed and hidden not in listed
    for name in (hidden, _name("ghost-")):  # existing or not: the same answer
        answer = bob.list_topics(topic=name, timeout=30).topics[name]
        assert answer.error is not None
        assert answer.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert hidden in _admin(secured).list_topics(timeout=30).topics


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    acl = _acl(ResourceType.TOPIC, "kept", "User:bob", AclOperation.READ,
               ResourcePatternType.PREFIXED)  # fmt: skip
    settings = authorizer_settings(USERS) | {"data_dir": tmp_path / "data"}
    with CheckedKafka(**settings) as kafka:
        _create(kafka, acl)
    with CheckedKafka(**settings) as kafka:
        assert _admin(kafka).describe_acls(ANY_FILTER, request_timeout=30).result(30) == [acl]


def test_tls_client_certificate_subject_is_the_principal(tmp_path: Path) -> None:
    """On an SSL listener with client authentication the principal is ``User:`` and the
    certificate's RFC 2253 subject (read here by ``cryptography``, independently)."""
    t = tls_files(tmp_path)
    ca = t.authority
    files = {"ca": t.ca, "cert": t.cert, "key": t.key}

    def client(cn: str) -> tuple[str, str]:
        # An identity besides the subject: cryptography 51 refuses a certificate whose
        # subjectAltName would be empty (the principal comes from the subject alone).
        leaf = ca.issue_cert(f"{cn}.clients.test", common_name=cn, organization_name="Acme, Inc.")
        pem = tmp_path / f"{cn}.pem"
        leaf.private_key_and_cert_chain_pem.write_to_path(str(pem))
        subject = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).subject
        return str(pem), f"User:{subject.rfc4514_string()}"

    (admin_pem, admin), (writer_pem, writer), (other_pem, _other) = (
        client("admin"),
        client("writer"),
        client("other"),
    )
    security = ListenerSecurity(
        protocol="SSL",
        ssl_certfile=files["cert"],
        ssl_keyfile=files["key"],
        ssl_cafile=files["ca"],
        ssl_client_auth=True,
    )
    with CheckedKafka(security=security, authorizer=True, super_users=(admin,)) as kafka:
        kafka.create_topic("signed", 1)

        def conf(pem: str) -> dict[str, Any]:
            return {
                "bootstrap.servers": kafka.bootstrap_servers,
                "security.protocol": "SSL",
                "ssl.ca.location": str(files["ca"]),
                "ssl.certificate.location": pem,
                "ssl.key.location": pem,
            }

        admin_client = AdminClient(conf(admin_pem))
        grant = _acl(ResourceType.TOPIC, "signed", writer, AclOperation.WRITE)
        admin_client.create_acls([grant], request_timeout=30)[grant].result(30)
        assert "," in writer and "\\," in writer  # the escaped "Acme\, Inc." is matched

        def produce(pem: str) -> KafkaError | None:
            reports: list[KafkaError | None] = []
            producer = Producer(conf(pem))
            producer.produce("signed", b"x", on_delivery=lambda err, _m: reports.append(err))
            producer.flush(30)
            assert len(reports) == 1, "no delivery report"
            return reports[0]

        assert produce(writer_pem) is None
        refused = produce(other_pem)
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_reflect_the_acls(secured: EmbeddedKafka) -> None:
    """Metadata's and DescribeCluster-style authorized operations through librdkafka and
    the Java client: what the principal may do, not every supported operation."""
    topic = _name("ops-")
    secured.create_topic(topic, 1)
    _create(
        secured,
        _acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ),
        _acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.ALTER_CONFIGS),
    )
    bob = _admin(secured, "bob")
    [described] = bob.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True, request_timeout=30
    ).values()
    ops = {op.name for op in described.result(30).authorized_operations}
    assert ops == {"READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}
    java = JavaClient(secured.bootstrap_servers, *_java_sasl("bob"))
    try:
        assert java.call("topicops", topic) == sorted(
            ["READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"]
        )
    finally:
        java.close()


def test_a_prepared_transaction_is_ended_only_by_its_prefixs_owner(
    secured: EmbeddedKafka,
) -> None:
    """Bob prepares a transaction of prefix ``b-`` (KIP-939's "end it elsewhere"); Alice,
    allowed only ``a-``, cannot end it (EndTxn refused); Bob's own commit then lands."""
    run, topic = _own_prefixes(secured, "prep-", "bob")
    with _our_producer(secured, "bob", f"b-{run}-1") as bob:
        bob.init_transactions()
        bob.begin_transaction()
        bob.produce(topic, pa.array([b"prepared"], pa.binary()), partitions=0)
        prepared = bob.prepare()
        alice_config = _our_producer_config(secured, "alice", f"a-{run}-1").connection_config()
        with pytest.raises(AuthorizationError) as refused:  # FindCoordinator
            end_transaction(secured.bootstrap_servers, prepared, commit=False, config=alice_config)
        assert (refused.value.operation, refused.value.resource_name) == (
            "DESCRIBE",
            prepared.transactional_id,
        )
        # Allowed to look it up, still not to end it: EndTxn itself is refused.
        _create(
            secured,
            _acl(
                ResourceType.TRANSACTIONAL_ID,
                prepared.transactional_id,
                "User:alice",
                AclOperation.DESCRIBE,
            ),
        )
        with pytest.raises(AuthorizationError) as refused:
            end_transaction(secured.bootstrap_servers, prepared, commit=False, config=alice_config)
        assert (refused.value.operation, refused.value.resource_name) == (
            "WRITE",
            prepared.transactional_id,
        )
        assert USERS["alice"] not in str(refused.value)
        end_transaction(
            secured.bootstrap_servers,
            prepared,
            commit=True,
            config=_our_producer_config(secured, "bob", f"b-{run}-1").connection_config(),
        )
    assert _committed_values(secured, topic) == [b"prepared"]
