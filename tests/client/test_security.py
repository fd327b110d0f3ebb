"""TLS and SASL pieces of the client.

SCRAM is checked against the RFC 5802 / RFC 7677 example exchanges. TLS runs for real:
a TLS-terminating TCP relay (transport only, no Kafka logic) in front of the embedded
broker carries ApiVersions and Metadata. End-to-end SASL waits for secured listeners on
the embedded cluster.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.errors import AuthenticationError, ConfigError
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import ProducerConfig
from pyspark_kafka_txn.client.security import ScramClient, SecurityConfig
from tests.conftest import KafkaTarget


def test_scram_sha256_rfc7677_exchange() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final_message(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(AuthenticationError, match="signature"):
        client.verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_sha1_rfc5802_exchange_and_errors() -> None:
    client = ScramClient("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    final = client.final_message(
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    )
    assert final.endswith(b",p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    client.verify_server_final(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")
    with pytest.raises(AuthenticationError, match="server error invalid-proof"):
        client.verify_server_final(b"e=invalid-proof")
    other = ScramClient("SCRAM-SHA-512", "u", "p", nonce="abc")
    with pytest.raises(AuthenticationError, match="malformed"):
        other.final_message(b"r=xyz,s=QSXC,i=4096")  # nonce does not extend ours


def test_security_options_parse_and_hide_secrets() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cr=t\\"x";'
    )
    config = ProducerConfig.from_options(
        {
            "bootstrap.servers": "h:1",
            "transactional.id": "t",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas,
            "ssl.truststore.location": "/ca.pem",
            "ssl.truststore.type": "PEM",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    sec = config.security
    assert (sec.protocol, sec.sasl_mechanism, sec.username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "alice",
    )
    assert sec.password == 's3cr=t"x'
    assert sec.ca_file == "/ca.pem" and not sec.check_hostname
    assert "s3cr" not in repr(config) and "s3cr" not in repr(config.connection_config())
    with pytest.raises(ConfigError, match="convert the store to PEM"):
        SecurityConfig.from_options({"ssl.truststore.location": "/x.jks"})
    with pytest.raises(ConfigError, match="username and password"):
        SecurityConfig.from_options({"security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match=r"sasl\.mechanism"):
        SecurityConfig(protocol="SASL_SSL", sasl_mechanism="GSSAPI", username="u", password="p")
    plain = SecurityConfig.from_options(
        {"security.protocol": "sasl_plaintext", "sasl.username": "u", "sasl.password": "pw"}
    )
    assert plain.uses_sasl and not plain.uses_tls and plain.sasl_mechanism == "PLAIN"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for name in ("ca", "other-ca"):
        _openssl("req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.pem",
                 "-days", "2", "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    _openssl("req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sign = ("-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-extfile", "san.ext")
    _openssl("x509", "-req", "-in", "srv.csr", *sign, "-out", "srv.pem", "-days", "2", cwd=d)
    return d


@contextlib.contextmanager
def tls_relay(certs: Path, target: tuple[str, int]) -> Iterator[int]:
    """Accept TLS on a local port and relay the plain bytes to ``target``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "srv.pem", certs / "srv.key")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    sockets: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                raw.settimeout(5)
                client = ctx.wrap_socket(raw, server_side=True)
                client.settimeout(None)
            except (ssl.SSLError, OSError):
                raw.close()  # e.g. the client rejected our certificate
                continue
            upstream = socket.create_connection(target)
            sockets.extend([client, upstream])
            for a, b in ((client, upstream), (upstream, client)):
                t = threading.Thread(target=pump, args=(a, b), daemon=True)
                t.start()
                threads.append(t)

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        acceptor.join(5)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(5)
        for s in sockets:
            s.close()
        listener.close()


def test_tls_connection_negotiates_and_reads_metadata(kafka: KafkaTarget, certs: Path) -> None:
    host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    topic = kafka.create_topic(partitions=2)
    with tls_relay(certs, (host, int(port))) as tls_port:
        good = ConnectionConfig(security=SecurityConfig("SSL", ca_file=str(certs / "ca.pem")))
        with ClusterClient(f"127.0.0.1:{tls_port}", good) as cluster:
            conn = cluster.any_connection()
            assert isinstance(conn._sock, ssl.SSLSocket)
            assert 3 in conn.api_ranges  # ApiVersions went through TLS
            body = cluster.refresh([topic])
            assert [t.name for t in body.topics] == [topic]
            assert len(body.topics[0].partitions) == 2
        # A certificate signed by another CA is an authentication error, at once.
        wrong = ConnectionConfig(
            security=SecurityConfig("SSL", ca_file=str(certs / "other-ca.pem"))
        )
        started = time.monotonic()
        with (
            ClusterClient(f"127.0.0.1:{tls_port}", wrong) as cluster,
            pytest.raises(AuthenticationError, match="TLS handshake"),
        ):
            cluster.any_connection()
        assert time.monotonic() - started < 5
