"""What the ACL tests share: the least-privilege pipelines' input and the independent
read-back of an output topic (embedded cluster and Apache Kafka), and the SASL/PLAIN
cluster with an authorizer and the ACL bindings and filters the super user manages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from tests.support.clients import consume_messages
from tests.support.clusters import CheckedKafka

#: The pipelines' input: 3 committed transactions of 10 records over 2 partitions, as
#: (partition, value).
INPUT = [[(i % 2, f"b{n}-{i}".encode()) for i in range(10)] for n in range(3)]

#: A hang detector for reading a topic to its end (not a timing assertion).
READ_HANG_S = 180.0


def input_values() -> Counter[bytes]:
    """Every value of :data:`INPUT`, once."""
    return Counter(value for batch in INPUT for _, value in batch)


def committed_values(
    bootstrap: str, topic: str, partitions: int = 2, **conf: Any
) -> Counter[bytes]:
    """Every value a read_committed librdkafka consumer sees in ``topic``, counted.

    Parameters
    ----------
    bootstrap
        The cluster's bootstrap servers.
    topic
        The topic, read from offset 0 of each of its ``partitions`` to the end.
    partitions
        How many partitions ``topic`` has.
    **conf
        More librdkafka settings: a principal allowed to read ``topic`` on a secured
        cluster.

    Returns
    -------
    collections.Counter
        How many times each value is visible.
    """
    seen: Counter[bytes] = Counter()
    for message in consume_messages(bootstrap, topic, partitions, timeout_s=READ_HANG_S, **conf):
        value = message.value()
        assert value is not None, f"a record without a value in {topic}"
        seen[value] += 1
    return seen


#: The super user of :func:`authorizer_settings` (it manages the ACLs).
SUPER_USER = "admin"


def authorizer_settings(users: Mapping[str, str]) -> dict[str, Any]:
    """Settings of an embedded cluster with a SASL/PLAIN listener and an authorizer.

    Parameters
    ----------
    users
        Password by user name; it must hold :data:`SUPER_USER`, the super user.

    Returns
    -------
    dict
        Keyword arguments of ``CheckedKafka``/``EmbeddedKafka`` (more may be added).
    """
    security = ListenerSecurity(
        protocol="SASL_PLAINTEXT", sasl_mechanisms=("PLAIN",), users=dict(users)
    )
    return {"security": security, "authorizer": True, "super_users": (f"User:{SUPER_USER}",)}


def secured_fixture(
    users: Mapping[str, str], **settings: Any
) -> Callable[[], Iterator[EmbeddedKafka]]:
    """A module-scoped ``secured`` fixture: a cluster of :func:`authorizer_settings`.

    Parameters
    ----------
    users
        Password by user name, :data:`SUPER_USER` among them.
    **settings
        More ``CheckedKafka`` settings.

    Returns
    -------
    callable
        The fixture; assign it to ``secured`` in the test module.
    """

    @pytest.fixture(scope="module")
    def secured() -> Iterator[EmbeddedKafka]:
        with CheckedKafka(**authorizer_settings(users), **settings) as kafka:
            yield kafka

    return secured


def allow(
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    principal: str,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    """An ACL of ``principal`` from any host (ALLOW unless ``permission`` says otherwise)."""
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def binding_filter(binding: AclBinding) -> AclBindingFilter:
    """The filter that matches exactly ``binding`` (to delete it)."""
    b = binding
    return AclBindingFilter(
        b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
        b.permission_type,
    )  # fmt: skip


def principal_filter(principal: str | None) -> AclBindingFilter:
    """The filter of every ACL of ``principal`` (of everyone's when None)."""
    return AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip


def replace_acls(admin: AdminClient, principal: str, acls: Iterable[AclBinding]) -> None:
    """Make ``acls`` the only ACLs of ``principal``.

    Parameters
    ----------
    admin
        A super user's admin client.
    principal
        Whose ACLs are deleted first (all of them).
    acls
        The ACLs created then, if any.
    """
    for future in admin.delete_acls([principal_filter(principal)], request_timeout=30).values():
        future.result(30)
    acls = list(acls)
    if acls:
        for future in admin.create_acls(acls, request_timeout=30).values():
            future.result(30)
