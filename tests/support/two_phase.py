"""The KIP-939 clusters of the tests: the broker settings that turn two-phase commit
participation on, for the embedded cluster and for Apache Kafka alike.

Apache Kafka 4.4.0 serves InitProducerId with ``Enable2Pc`` when
``transaction.two.phase.commit.enable=true`` and advertises InitProducerId v6 (still
flagged unstable) only with ``unstable.api.versions.enable=true``; the embedded cluster's
``transaction_two_phase_commit`` implies both. ``transaction.max.timeout.ms`` is small on
every one of these clusters, so that a test can outlive it in seconds, and large enough for
an ordinary transaction of a loaded 2-core lane (see ``docs/dev/kip-939.md``).
"""

from __future__ import annotations

from typing import Any

from tests.support.acls import SUPER_USER, authorizer_settings

#: ``transaction.max.timeout.ms`` of the KIP-939 clusters (Kafka's default is 15 minutes).
MAX_TIMEOUT_MS = 15_000

#: The timeout a coordinator stores for an ``Enable2Pc`` transaction (``Integer.MAX_VALUE``).
TWO_PC_TIMEOUT_MS = 2**31 - 1

#: The writer's and the client's option.
OPTION = "transaction.two.phase.commit.enable"

#: Users of the KIP-939 cluster with an authorizer (the first is the brokers' own and a
#: super user, :data:`tests.support.acls.SUPER_USER`).
ACL_USERS = {SUPER_USER: "admin-pw", "alice": "alice-pw"}


def apache_config(*, two_phase: bool) -> dict[str, str]:
    """Apache Kafka settings: InitProducerId v6 advertised; 2PC on or off."""
    return {
        "unstable.api.versions.enable": "true",
        "transaction.two.phase.commit.enable": "true" if two_phase else "false",
        "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS),
    }


def embedded_settings(*, two_phase: bool) -> dict[str, Any]:
    """The same for the embedded cluster (``CheckedKafka`` keyword arguments)."""
    return {
        "transaction_two_phase_commit": two_phase,
        "unstable_api_versions": True,
        "transaction_max_timeout_ms": MAX_TIMEOUT_MS,
        "transaction_abort_interval_ms": 200,
        "group_initial_rebalance_delay_ms": 300,
    }


def embedded_acl_settings() -> dict[str, Any]:
    """The embedded cluster with 2PC on, SASL/PLAIN and an authorizer."""
    return {**embedded_settings(two_phase=True), **authorizer_settings(ACL_USERS)}


def sasl_options(user: str) -> dict[str, str]:
    """Client settings (librdkafka's names, which our client takes too) of ``user``."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": ACL_USERS[user],
    }


def java_sasl(user: str) -> tuple[str, ...]:
    """The Java client's settings of ``user`` (``name=value``)."""
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{ACL_USERS[user]}";'
    )
    return ("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", f"sasl.jaas.config={jaas}")
