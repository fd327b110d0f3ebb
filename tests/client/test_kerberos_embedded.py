"""GSSAPI against the embedded cluster, which does not offer it (Kerberos against Apache
Kafka and a real KDC: tests/client/test_kerberos_apache.py).

The writer's client asks for GSSAPI in SaslHandshake; the embedded cluster answers
UNSUPPORTED_SASL_MECHANISM with the mechanisms it has, and the client fails at once with
an AuthenticationError naming GSSAPI and those mechanisms, before any Kerberos is needed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import ProducerConfig
from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import AuthenticationError
from tests.support.clusters import CheckedKafka


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", users={"admin": "admin-pw"})
    with CheckedKafka(security=security) as kafka:
        yield kafka


def test_gssapi_is_refused_naming_the_mechanisms(sasl_kafka: EmbeddedKafka) -> None:
    config = ProducerConfig.from_options(
        {
            "bootstrap.servers": sasl_kafka.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useKeyTab=true keyTab="/nowhere.keytab" principal="app@EX.COM";',
            "transactional.id": "t",
        }
    )
    with (
        pytest.raises(AuthenticationError, match=r"GSSAPI refused by .*enabled: .*SCRAM") as info,
        ClusterClient(sasl_kafka.bootstrap_servers, config.connection_config()) as cluster,
    ):
        cluster.refresh()
    assert "nowhere.keytab" not in str(info.value)
