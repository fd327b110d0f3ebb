"""SCRAM users managed at run time: Describe/AlterUserScramCredentials.

Through librdkafka's admin client: a user created by AlterUserScramCredentials can
authenticate at once with that mechanism (and not with the other), a deleted one cannot;
Kafka's checks (iterations, unknown users, duplicates) give Kafka's errors; nothing but
mechanisms and iterations is ever described; the credentials survive a restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from tests.broker.java_client import JavaClient, JavaClientError
from tests.support.acls import allow
from tests.support.clients import sasl_conf
from tests.support.clusters import CheckedKafka

ADMIN = ("admin", "admin-secret")
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
HANG_S = 60.0  # hang detector, never a timing assertion


def _conf(scram_cluster: EmbeddedKafka, user: str, password: str, mechanism: str) -> dict[str, Any]:
    return dict(sasl_conf(scram_cluster.bootstrap_servers, mechanism, user, password))


def _admin(scram_cluster: EmbeddedKafka) -> AdminClient:
    return AdminClient(_conf(scram_cluster, *ADMIN, "SCRAM-SHA-512"))


@pytest.fixture
def scram_cluster(tmp_path: Path) -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", users=dict([ADMIN]))
    with CheckedKafka(security=security, data_dir=tmp_path / "data") as cluster:
        cluster.create_topic("t", 1)
        yield cluster


def _authenticates(scram_cluster: EmbeddedKafka, user: str, password: str, mechanism: str) -> bool:
    """Whether a producer with these credentials gets a record acknowledged (True) or
    an authentication error (False), whichever comes first."""
    codes: list[int] = []
    delivered: list[object] = []
    producer = Producer(
        {
            **_conf(scram_cluster, user, password, mechanism),
            "error_cb": lambda e: codes.append(e.code()),
        }
    )
    producer.produce("t", b"x", on_delivery=lambda err, _m: delivered.append(err))
    deadline = time.monotonic() + HANG_S
    while not delivered and KafkaError._AUTHENTICATION not in codes:
        assert time.monotonic() < deadline, f"neither delivered nor refused: {codes}"
        producer.poll(0.05)
    if delivered:
        assert delivered == [None], delivered
        return True
    producer.purge()
    producer.flush(0)
    return False


def _alter(admin: AdminClient, *changes: Any) -> dict[str, Exception | None]:
    futures = admin.alter_user_scram_credentials(list(changes), request_timeout=30)
    out: dict[str, Exception | None] = {}
    for user, future in futures.items():
        try:
            future.result(30)
            out[user] = None
        except KafkaException as exc:
            out[user] = exc
    return out


def _code(error: Exception | None) -> int | None:
    return None if error is None else error.args[0].code()


def test_users_created_and_deleted_at_run_time(scram_cluster: EmbeddedKafka) -> None:
    admin = _admin(scram_cluster)
    user = f"u{uuid.uuid4().hex[:6]}"
    assert not _authenticates(scram_cluster, user, "pw-1", "SCRAM-SHA-256")

    created = _alter(
        admin, UserScramCredentialUpsertion(user, ScramCredentialInfo(SHA256, 8192), b"pw-1")
    )
    assert created == {user: None}
    assert _authenticates(scram_cluster, user, "pw-1", "SCRAM-SHA-256")
    assert not _authenticates(scram_cluster, user, "wrong", "SCRAM-SHA-256")
    assert not _authenticates(scram_cluster, user, "pw-1", "SCRAM-SHA-512")  # no credential there

    # (its stubs return a future or a dict of them, whichever the call gets)
    described = admin.describe_user_scram_credentials([user])[user].result(30)  # type: ignore[index]
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (SHA256, 8192)
    ]
    everyone = admin.describe_user_scram_credentials().result(30)
    assert set(everyone) == {ADMIN[0], user}

    assert _alter(admin, UserScramCredentialDeletion(user, SHA256)) == {user: None}
    assert not _authenticates(scram_cluster, user, "pw-1", "SCRAM-SHA-256")
    with pytest.raises(KafkaException) as gone:
        admin.describe_user_scram_credentials([user])[user].result(30)  # type: ignore[index]
    assert gone.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def test_kafka_checks_on_alterations(scram_cluster: EmbeddedKafka) -> None:
    admin = _admin(scram_cluster)
    few, missing, twice = (f"u{uuid.uuid4().hex[:6]}" for _ in range(3))
    results = _alter(
        admin,
        UserScramCredentialUpsertion(few, ScramCredentialInfo(SHA256, 1000), b"pw"),
        UserScramCredentialDeletion(missing, SHA512),
        UserScramCredentialUpsertion(twice, ScramCredentialInfo(SHA256, 4096), b"a"),
        UserScramCredentialUpsertion(twice, ScramCredentialInfo(SHA256, 4096), b"b"),
    )
    assert {u: _code(e) for u, e in results.items()} == {
        few: KafkaError.UNACCEPTABLE_CREDENTIAL,
        missing: KafkaError.RESOURCE_NOT_FOUND,
        twice: KafkaError.DUPLICATE_RESOURCE,
    }
    assert "Too few iterations" in str(results[few])
    # None of them was applied.
    everyone = admin.describe_user_scram_credentials().result(30)
    assert set(everyone) == {ADMIN[0]}


def test_credentials_survive_a_restart(scram_cluster: EmbeddedKafka) -> None:
    admin = _admin(scram_cluster)
    user = f"u{uuid.uuid4().hex[:6]}"
    assert _alter(
        admin, UserScramCredentialUpsertion(user, ScramCredentialInfo(SHA512, 4096), b"pw")
    ) == {user: None}
    scram_cluster.restart()
    assert _authenticates(scram_cluster, user, "pw", "SCRAM-SHA-512")


def test_java_admin_manages_scram_users(scram_cluster: EmbeddedKafka) -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN[0]}" password="{ADMIN[1]}";'
    )
    java = JavaClient(
        scram_cluster.bootstrap_servers,
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=SCRAM-SHA-512",
        f"sasl.jaas.config={jaas}",
    )
    user = f"u{uuid.uuid4().hex[:6]}"
    try:
        java.call("scramupsert", user, "SCRAM_SHA_256", 4096, "java-pw")
        assert java.call("scramdescribe", user) == [["SCRAM_SHA_256", 4096]]
    finally:
        java.close()
    # The Java client's salted password is what librdkafka's login is checked against.
    assert _authenticates(scram_cluster, user, "java-pw", "SCRAM-SHA-256")
    assert not _authenticates(scram_cluster, user, "other", "SCRAM-SHA-256")


def test_describe_needs_describe_on_the_cluster() -> None:
    """Without DESCRIBE on the cluster the request is refused (the Java admin client sees
    ClusterAuthorizationException for the user it named); once granted, the same user
    sees the mechanisms and iterations. (librdkafka's admin client crashes the process
    on this refusal, so the Java client checks it.)"""
    reader = ("reader", "reader-secret")
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", users=dict([ADMIN, reader]))
    with CheckedKafka(
        security=security, authorizer=True, super_users=("User:admin",)
    ) as scram_cluster:
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{reader[0]}" password="{reader[1]}";'
        )
        java = JavaClient(
            scram_cluster.bootstrap_servers,
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=SCRAM-SHA-512",
            f"sasl.jaas.config={jaas}",
        )
        try:
            with pytest.raises(JavaClientError) as refused:
                java.call("scramdescribe", ADMIN[0])
            assert refused.value.error == "ClusterAuthorizationException", refused.value

            grant = allow(
                ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE, "User:reader"
            )
            admin = _admin(scram_cluster)
            for future in admin.create_acls([grant], request_timeout=30).values():
                future.result(30)
            assert java.call("scramdescribe", ADMIN[0]) == [
                ["SCRAM_SHA_256", 4096],
                ["SCRAM_SHA_512", 4096],
            ]
        finally:
            java.close()
