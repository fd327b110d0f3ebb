"""Spark writes over Kerberos (SASL/GSSAPI) with the options of a ``format("kafka")`` job.

A real MIT KDC and Apache Kafka with a GSSAPI listener (:mod:`tests.support.kerberos`); a
Spark of its own (:mod:`tests.jobs.kerberos_job`) started with ``KRB5_CONFIG`` in its
environment, as a user sets it on the driver and the executors. A batch ``df.write`` with
``kafka.sasl.mechanism=GSSAPI``, ``kafka.sasl.kerberos.service.name`` and a
``Krb5LoginModule`` keytab JAAS line commits every row once, read back by an independent
client (librdkafka, as the admin over SCRAM); the KDC issued the query's principal a
ticket for the brokers' service. The reader with the same options stops with the error
that names ``kafka.sasl.mechanism`` and why (confluent-kafka's wheel has no GSSAPI), since
that is what a user copying a working job's settings meets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_kafka_txn.options.kerberos import librdkafka_has_gssapi
from tests.support.apache_kafka import ApacheKafka
from tests.support.clients import consume_all
from tests.support.hang import LONG_HANG_S
from tests.support.kerberos import SERVICE, Kdc, kerberos_kafka, krb5_jaas

pytestmark = [pytest.mark.own_spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ROWS = [f"krb-row-{i}" for i in range(20)]


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    with Kdc(workdir=tmp_path_factory.mktemp("kdc")) as server:
        yield server


@pytest.fixture(scope="module")
def apache(kdc: Kdc) -> Iterator[ApacheKafka]:
    password = f"krb-admin-{uuid.uuid4().hex[:10]}"
    # The query's principal may do everything: this test is about signing in, ACLs on
    # Kerberos principals are tested in tests/client/test_kerberos_apache.py.
    with kerberos_kafka(kdc, admin_password=password, super_users=("User:sparkapp",)) as cluster:
        yield cluster


def test_spark_writes_over_kerberos(kdc: Kdc, apache: ApacheKafka, tmp_path: Path) -> None:
    keytab = kdc.add_principal("sparkapp")
    topic = f"krb-spark-{uuid.uuid4().hex[:8]}"
    apache.create_topic(topic, 2)
    options = {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "GSSAPI",
        "kafka.sasl.kerberos.service.name": SERVICE,
        "kafka.sasl.jaas.config": krb5_jaas(keytab, kdc.principal("sparkapp")),
    }
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "bootstrap": apache.bootstrap_servers,
                "topic": topic,
                "rows": ROWS,
                "options": options,
            }
        )
    )
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "KRB5_CONFIG": str(kdc.krb5_conf),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.jobs.kerberos_job", str(settings), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=LONG_HANG_S,  # a hang detector, inside pytest's timeout
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    result = json.loads((out / "result.json").read_text())
    assert result["write"] is None, result["write"]

    read = consume_all(apache.bootstrap_servers, topic, 2, **apache.client_config())
    assert Counter(v for _, _, v in read) == Counter(r.encode() for r in ROWS)
    service = kdc.principal(f"{SERVICE}/127.0.0.1")
    assert f"{kdc.principal('sparkapp')} for {service}" in kdc.log_text()

    if librdkafka_has_gssapi():  # confluent-kafka built against a librdkafka with Cyrus SASL
        assert result["read"] is None, result["read"]
    else:
        assert "'kafka.sasl.mechanism'='GSSAPI'" in (result["read"] or ""), result["read"]
        assert "librdkafka" in result["read"]
