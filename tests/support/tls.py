"""Certificates for the TLS listeners, from ``trustme``: the one builder every test uses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class TlsFiles:
    """PEM files under one directory, and the CA that signed them (to issue more)."""

    authority: trustme.CA
    ca: Path  # the CA certificate the brokers' certificates chain to
    cert: Path  # the broker's certificate chain (127.0.0.1, localhost)
    key: Path  # the broker's private key
    server: Path  # the broker's key and chain in one file
    client: Path  # a client certificate the brokers trust (key and chain in one file)
    wrong_ca: Path  # another CA: trusting only it, a client rejects the brokers
    stranger: Path  # a client certificate from ``wrong_ca`` (key and chain in one file)


def tls_files(root: Path) -> TlsFiles:
    """Write a CA, a broker certificate for 127.0.0.1, client certificates (one trusted,
    one from a foreign CA) and the foreign CA under ``root``."""
    ca, other = trustme.CA(), trustme.CA()
    files = TlsFiles(
        authority=ca,
        ca=root / "ca.pem",
        cert=root / "server-cert.pem",
        key=root / "server.key",
        server=root / "server.pem",
        client=root / "client.pem",
        wrong_ca=root / "wrong-ca.pem",
        stranger=root / "stranger.pem",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    other.cert_pem.write_to_path(str(files.wrong_ca))
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_pem.write_to_path(str(files.key))
    for i, blob in enumerate(server.cert_chain_pems):
        blob.write_to_path(str(files.cert), append=i > 0)
    server.private_key_and_cert_chain_pem.write_to_path(str(files.server))
    ca.issue_cert("client").private_key_and_cert_chain_pem.write_to_path(str(files.client))
    other.issue_cert("client").private_key_and_cert_chain_pem.write_to_path(str(files.stranger))
    return files
