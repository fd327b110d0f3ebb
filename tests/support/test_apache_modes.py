"""Which metadata mode the Apache Kafka launcher gives each release, and the broker settings
of each mode (``tests/support/apache_kafka/cluster.py``); nothing is started here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.apache_kafka import KRAFT, ZOOKEEPER, ApacheKafka, Security, default_mode


def _properties(cluster: ApacheKafka) -> dict[str, str]:
    text = cluster._server_properties(cluster.nodes[0])
    return dict(line.split("=", 1) for line in text.splitlines() if line)


@pytest.mark.parametrize(
    ("version", "mode"),
    [
        ("3.0.2", ZOOKEEPER),
        ("3.2.3", ZOOKEEPER),
        ("3.3.1", KRAFT),
        ("3.7.2", KRAFT),
        ("3.9.2", KRAFT),
        ("4.0.2", KRAFT),
        ("4.4.0", KRAFT),
    ],
)
def test_zookeeper_before_3_3_kraft_from_3_3(
    version: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAFKA_TXN_APACHE_MODE", raising=False)
    assert default_mode(version) == mode


def test_the_mode_can_be_chosen_for_3x_but_4x_has_no_zookeeper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_TXN_APACHE_MODE", KRAFT)
    assert default_mode("3.0.2") == KRAFT
    monkeypatch.setenv("KAFKA_TXN_APACHE_MODE", ZOOKEEPER)
    assert default_mode("3.7.2") == ZOOKEEPER
    with pytest.raises(ValueError, match="no ZooKeeper mode"):
        default_mode("4.0.2")
    monkeypatch.setenv("KAFKA_TXN_APACHE_MODE", "zk")
    with pytest.raises(ValueError, match="KAFKA_TXN_APACHE_MODE"):
        default_mode("3.7.2")


def test_zookeeper_mode_settings(tmp_path: Path) -> None:
    security = Security(protocol="SASL_PLAINTEXT", users={"admin": "pw"}, authorizer=True)
    cluster = ApacheKafka(3, version="3.0.2", mode=ZOOKEEPER, security=security, workdir=tmp_path)
    props = _properties(cluster)
    assert props["zookeeper.connect"] == f"127.0.0.1:{cluster.zk_port}"
    assert props["broker.id"] == "1"
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert not {"process.roles", "node.id", "controller.quorum.voters"} & props.keys()
    assert "CONTROLLER" not in props["listeners"] + props["listener.security.protocol.map"]
    with pytest.raises(ValueError, match="transaction_version"):
        ApacheKafka(1, version="3.0.2", mode=ZOOKEEPER, transaction_version=1, workdir=tmp_path)


def test_kraft_mode_settings(tmp_path: Path) -> None:
    security = Security(authorizer=True)
    cluster = ApacheKafka(1, version="3.7.2", mode=KRAFT, security=security, workdir=tmp_path)
    props = _properties(cluster)
    assert props["process.roles"] == "broker,controller" and "zookeeper.connect" not in props
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert cluster.zk_port == 0
