"""Java key stores (JKS, PKCS12, made by ``keytool``) as Spark users pass them (issue 34).

* Against the embedded cluster's SSL listener with client certificates required: the
  writer's client (Python's ``ssl``) writes a transaction with one pair of stores, the
  reader's librdkafka configuration (in-memory PEM) reads it back with the other pair.
  (Apache Kafka, with the certificates' principals in ACLs: ``test_keystores_apache.py``.)
* What reaches the disk: Python's ``ssl`` loads a key only from a file; the file it gets
  is an anonymous in-memory one, or (where there is none) an owner-only file in a private
  directory removed at once; either way the key in it is encrypted.
* Bad stores fail at option parsing (on the driver, before any task), through the reader's
  and the writer's option parsers, with an error naming the option as the user wrote it
  and never a password.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from pyspark_kafka_txn import cli
from pyspark_kafka_txn.client import keystores
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.kafka import librdkafka_client_config, librdkafka_params
from pyspark_kafka_txn.options.reader import parse_reader_options
from pyspark_kafka_txn.options.writer import parse_writer_options
from tests.support.clients import consume_all
from tests.support.clusters import CheckedKafka
from tests.support.keystores import JavaStores, Store, keytool

PAIRS = {"jks": ("trust_jks", "app_jks"), "pkcs12": ("trust_p12", "app_p12")}


@pytest.fixture(scope="module")
def mtls_kafka(keytool_stores: JavaStores) -> Iterator[EmbeddedKafka]:
    tls = keytool_stores.tls
    security = ListenerSecurity(
        protocol="SSL",
        ssl_certfile=tls.server,
        ssl_keyfile=tls.server,
        ssl_cafile=tls.ca,
        ssl_client_auth=True,
    )
    with CheckedKafka(security=security) as kafka:
        yield kafka


def _java_options(stores: JavaStores, pair: str, prefix: str = "") -> dict[str, str]:
    trust, key = (getattr(stores, name) for name in PAIRS[pair])
    return {
        f"{prefix}security.protocol": "SSL",
        **trust.truststore_options(prefix),
        **key.keystore_options(prefix),
    }


@pytest.mark.parametrize(("writer", "reader"), [("jks", "pkcs12"), ("pkcs12", "jks")])
def test_write_and_read_with_java_stores(
    mtls_kafka: EmbeddedKafka, keytool_stores: JavaStores, writer: str, reader: str
) -> None:
    topic = f"ks-{writer}-{uuid.uuid4().hex[:8]}"
    mtls_kafka.create_topic(topic, 1)
    options = {
        "bootstrap.servers": mtls_kafka.bootstrap_servers,
        "transactional.id": f"tid-{topic}",
        **_java_options(keytool_stores, writer),
    }
    values = pa.array([f"{writer}-{i}".encode() for i in range(3)], pa.binary())
    with TransactionalProducer(ProducerConfig.from_options(options)) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce_arrow(topic, pa.RecordBatch.from_arrays([values], names=["value"]))
        producer.commit_transaction()
    params = librdkafka_params(
        _java_options(keytool_stores, reader), rejected={}, handled=frozenset()
    )
    conf = librdkafka_client_config(params)
    assert not {k for k in conf if k.endswith(".location")}  # PEM in memory, no file
    read = consume_all(mtls_kafka.bootstrap_servers, topic, 1, **conf)
    assert [v for _, _, v in read] == values.to_pylist()


def test_transactions_tool_takes_java_stores(
    mtls_kafka: EmbeddedKafka,
    keytool_stores: JavaStores,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``kafka-txn transactions list --command-config`` with a Java client's properties file
    (PKCS12 stores) lists a transaction left open by a writer with JKS stores."""
    topic = f"ks-cli-{uuid.uuid4().hex[:8]}"
    mtls_kafka.create_topic(topic, 1)
    tid = f"{topic}-0"
    options = {
        "bootstrap.servers": mtls_kafka.bootstrap_servers,
        "transactional.id": tid,
        **_java_options(keytool_stores, "jks"),
    }
    values = pa.array([b"open"], pa.binary())
    with TransactionalProducer(ProducerConfig.from_options(options)) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce_arrow(topic, pa.RecordBatch.from_arrays([values], names=["value"]))
        handle = producer.prepare()
    properties = tmp_path / "client.properties"
    properties.write_text(
        "".join(f"{k}={v}\n" for k, v in _java_options(keytool_stores, "pkcs12").items())
    )
    code = cli.main(
        [
            "transactions", "list", "--bootstrap-servers", mtls_kafka.bootstrap_servers,
            "--prefix", topic, "--command-config", str(properties),
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"{tid}\tOngoing\t{handle.producer_id}\t" in out


class _WatchingContext:
    """Calls ``load_cert_chain`` of a real context, first noting what the file it is given
    looks like to anybody who could open it."""

    def __init__(self) -> None:
        self.context = ssl.create_default_context()
        self.seen: list[tuple[str, int, int | None, bytes]] = []

    def load_cert_chain(self, path: str, password: str) -> None:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        private = not path.startswith("/proc/")
        parent = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) if private else None
        self.seen.append((path, mode, parent, Path(path).read_bytes()))
        self.context.load_cert_chain(path, password=password)


@pytest.mark.parametrize("memfd", [True, False], ids=["memfd", "private-file"])
def test_the_key_never_reaches_a_readable_file(
    keytool_stores: JavaStores,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    memfd: bool,
) -> None:
    _, spec = keystores.java_stores(keytool_stores.app_jks.keystore_options())
    assert spec is not None
    if not memfd:
        monkeypatch.delattr(os, "memfd_create")
        monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    watching = _WatchingContext()
    keystores.load_key_store(watching, spec)
    ((path, mode, parent, content),) = watching.seen
    assert path.startswith("/proc/self/fd/") if memfd else path.startswith(str(tmp_path))
    if not memfd:
        assert (mode, parent) == (0o600, 0o700)
        assert list(tmp_path.iterdir()) == []  # the file and its directory are gone
    assert b"BEGIN ENCRYPTED PRIVATE KEY" in content and b"BEGIN PRIVATE KEY" not in content
    assert content.count(b"BEGIN CERTIFICATE") == 2  # the chain: the client's, the CA's


# -- bad stores -------------------------------------------------------------------------


def _parse_both(options: dict[str, str]) -> list[ConfigError]:
    """The errors of the reader's and the writer's option parsers for ``options``."""
    errors = []
    with pytest.raises(ConfigError) as reader:
        parse_reader_options({"subscribe": "t", **options}, streaming=False)
    errors.append(reader.value)
    with pytest.raises(ConfigError) as writer:
        parse_writer_options({"topic": "t", **options})
    errors.append(writer.value)
    return errors


@pytest.fixture(scope="module")
def odd_stores(keytool_stores: JavaStores, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JCEKS store (a type kafka_txn does not read) and a JKS copy named .pem."""
    root = tmp_path_factory.mktemp("odd-stores")
    keytool(
        "-importcert", "-noprompt", "-alias", "ca", "-file", str(keytool_stores.tls.ca),
        "-keystore", str(root / "trust.jceks"), "-storetype", "JCEKS", "-storepass", "jceks-pw",
    )  # fmt: skip
    shutil.copy(keytool_stores.trust_jks.path, root / "truststore.pem")
    return root


def _bad_cases(s: JavaStores, odd: Path) -> dict[str, tuple[dict[str, str], str]]:
    t, k, k12 = s.trust_jks, s.app_jks, s.app_p12
    trust = t.truststore_options("kafka.")
    key = k.keystore_options("kafka.")
    key12 = k12.keystore_options("kafka.")
    return {
        "wrong-truststore-password": (
            {**trust, "kafka.ssl.truststore.password": "nope-1"},
            r"Option 'kafka\.ssl\.truststore\.password' does not open the JKS store .*"
            r"\(wrong password\)",
        ),
        "wrong-pkcs12-password": (
            {**s.trust_p12.truststore_options("kafka."), "kafka.ssl.truststore.password": "n-2"},
            r"Option 'kafka\.ssl\.truststore\.password' does not open the PKCS12 store",
        ),
        "wrong-key-password": (
            {**key, "kafka.ssl.key.password": "nope-3"},
            r"Option 'kafka\.ssl\.key\.password' does not open the private key of the JKS",
        ),
        "key-password-missing": (
            {k2: v for k2, v in key.items() if k2 != "kafka.ssl.key.password"},
            r"Option 'kafka\.ssl\.keystore\.password' does not open the private key .*\("
            r"give its own with 'kafka\.ssl\.key\.password'",
        ),
        "pkcs12-key-password-differs": (
            {**key12, "kafka.ssl.key.password": "nope-4"},
            r"Option 'kafka\.ssl\.key\.password' differs from 'kafka\.ssl\.keystore\.password'",
        ),
        "keystore-password-missing": (
            {k2: v for k2, v in key12.items() if k2 != "kafka.ssl.keystore.password"},
            r"Option 'kafka\.ssl\.keystore\.password' is required with "
            r"'kafka\.ssl\.keystore\.location' of type PKCS12",
        ),
        "missing-file": (
            {**trust, "kafka.ssl.truststore.location": str(odd / "none.jks")},
            r"Option 'kafka\.ssl\.truststore\.location': cannot read .*none\.jks.*: no such "
            r"file \(.* on the driver and on every executor\)",
        ),
        "no-key-entry": (
            {
                **key,
                "kafka.ssl.keystore.location": str(t.path),
                "kafka.ssl.keystore.password": t.password,
            },
            r"Option 'kafka\.ssl\.keystore\.location': the key store .* holds no private key",
        ),
        "unknown-type": (
            {**trust, "kafka.ssl.truststore.type": "BCFKS"},
            r"Option 'kafka\.ssl\.truststore\.type' must be JKS, PKCS12 or PEM, got 'BCFKS'",
        ),
        "jceks-file": (
            {"kafka.ssl.truststore.location": str(odd / "trust.jceks")},
            r"Option 'kafka\.ssl\.truststore\.type' is JKS but .* is a JCEKS store",
        ),
        "pem-file-typed-pkcs12": (
            {"kafka.ssl.truststore.location": str(s.tls.ca), "kafka.ssl.truststore.type": "PKCS12"},
            r"Option 'kafka\.ssl\.truststore\.type' is PKCS12 but .* is a PEM file: set it to PEM",
        ),
        "jks-file-typed-pem": (
            {
                "kafka.ssl.truststore.location": str(odd / "truststore.pem"),
                "kafka.ssl.truststore.type": "PEM",
            },
            r"Option 'kafka\.ssl\.truststore\.type' is PEM but .* is a JKS store: set it to JKS",
        ),
        "store-and-pem-file": (
            {**trust, "kafka.ssl.ca.location": str(s.tls.ca)},
            r"Option 'kafka\.ssl\.truststore\.location' \(a JKS store\) and "
            r"'kafka\.ssl\.ca\.location' name the same thing",
        ),
    }


CASES = [
    "wrong-truststore-password",
    "wrong-pkcs12-password",
    "wrong-key-password",
    "key-password-missing",
    "pkcs12-key-password-differs",
    "keystore-password-missing",
    "missing-file",
    "no-key-entry",
    "unknown-type",
    "jceks-file",
    "pem-file-typed-pkcs12",
    "jks-file-typed-pem",
    "store-and-pem-file",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_store_is_named_without_its_password(
    keytool_stores: JavaStores, odd_stores: Path, case: str
) -> None:
    options, expected = _bad_cases(keytool_stores, odd_stores)[case]
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:1",
        "kafka.security.protocol": "SSL",
        **options,
    }
    secrets = {v for k, v in options.items() if "password" in k}
    stores: list[Store] = [
        keytool_stores.trust_jks, keytool_stores.trust_p12, keytool_stores.app_jks,
        keytool_stores.app_p12,
    ]  # fmt: skip
    secrets |= {p for st in stores for p in (st.password, st.key_password) if p}
    for error in _parse_both(options):
        assert error.__cause__ is None  # no library exception (with its detail) chained
        text = f"{error} {error!r}"
        assert re.search(expected, str(error)), str(error)
        assert not any(secret in text for secret in secrets), text
