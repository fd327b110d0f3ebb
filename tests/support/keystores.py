"""Java key and trust stores made by Java's own ``keytool``, as a Kafka user makes them.

A key store: ``keytool -genkeypair`` (the key never leaves the store), ``-certreq``, the
request signed by the CA of :func:`tests.support.tls.tls_files` (as a company CA would),
then ``-importcert`` of the CA and of the signed certificate. A trust store:
``-importcert`` of the CA. Passwords are random per run.
"""

from __future__ import annotations

import datetime
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support.tls import TlsFiles, tls_files

KEYTOOL = shutil.which("keytool") or "/usr/bin/keytool"
KEYTOOL_TIMEOUT_S = 120.0  # a hang guard: one JVM start


@dataclass(frozen=True)
class Store:
    """A store file, its type and passwords (``key_password`` None: the store's)."""

    path: Path
    type: str
    password: str = field(repr=False)
    key_password: str | None = field(default=None, repr=False)

    def truststore_options(self, prefix: str = "") -> dict[str, str]:
        """Kafka's ``ssl.truststore.*`` options for this store."""
        return {
            f"{prefix}ssl.truststore.location": str(self.path),
            f"{prefix}ssl.truststore.type": self.type,
            f"{prefix}ssl.truststore.password": self.password,
        }

    def keystore_options(self, prefix: str = "") -> dict[str, str]:
        """Kafka's ``ssl.keystore.*`` (and ``ssl.key.password``) options for this store."""
        out = {
            f"{prefix}ssl.keystore.location": str(self.path),
            f"{prefix}ssl.keystore.type": self.type,
            f"{prefix}ssl.keystore.password": self.password,
        }
        if self.key_password is not None:
            out[f"{prefix}ssl.key.password"] = self.key_password
        return out


def keytool(*args: str) -> None:
    """Run ``keytool`` (its output shown if it fails)."""
    done = subprocess.run(
        [KEYTOOL, *args], capture_output=True, text=True, timeout=KEYTOOL_TIMEOUT_S
    )
    assert done.returncode == 0, f"keytool {args[0]} failed: {done.stdout}{done.stderr}"


def _password() -> str:
    return f"pw-{secrets.token_hex(8)}"


def truststore(ca_pem: Path, path: Path, store_type: str) -> Store:
    """A trust store holding the CA certificate ``ca_pem`` (alias ``ca``)."""
    store = Store(path, store_type, _password())
    keytool(
        "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
        "-keystore", str(path), "-storetype", store_type, "-storepass", store.password,
    )  # fmt: skip
    return store


def _sign(ca: trustme.CA, csr_pem: bytes) -> bytes:
    """The CA's client certificate for a certificate signing request (PEM)."""
    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    csr = x509.load_pem_x509_csr(csr_pem)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(csr.subject)
        .issuer_name(ca_cert.subject)
        .public_key(csr.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def keystore(
    ca: trustme.CA, ca_pem: Path, path: Path, store_type: str, cn: str, *, own_key_password: bool
) -> Store:
    """A key store with the key of ``CN=<cn>, O=kafka-txn tests``, its certificate signed by
    ``ca`` and the CA (alias ``ca``); the key has a password of its own if asked (JKS)."""
    store = Store(path, store_type, _password(), _password() if own_key_password else None)
    common = ["-keystore", str(path), "-storetype", store_type, "-storepass", store.password]
    key = ["-keypass", store.key_password] if store.key_password else []
    keytool(
        "-genkeypair", "-alias", "client", "-keyalg", "EC", "-groupname", "secp256r1",
        "-dname", f"CN={cn}, O=kafka-txn tests", "-validity", "2", *common, *key,
    )  # fmt: skip
    csr = path.with_suffix(".csr")
    keytool("-certreq", "-alias", "client", "-file", str(csr), *common, *key)
    signed = path.with_suffix(".crt")
    signed.write_bytes(_sign(ca, csr.read_bytes()))
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), *common)
    keytool("-importcert", "-noprompt", "-alias", "client", "-file", str(signed), *common, *key)
    return store


@dataclass(frozen=True)
class JavaStores:
    """The PEM files of :func:`tests.support.tls.tls_files` and keytool's stores beside
    them: trust stores of the CA and key stores of ``CN=app`` (JKS: its key with its own
    password) and ``CN=app12`` (PKCS12)."""

    tls: TlsFiles
    trust_jks: Store
    trust_p12: Store
    app_jks: Store
    app_p12: Store


def java_stores(root: Path) -> JavaStores:
    """Write the PEM files and make the stores under ``root`` (about ten JVM starts)."""
    tls = tls_files(root)
    return JavaStores(
        tls=tls,
        trust_jks=truststore(tls.ca, root / "truststore.jks", "JKS"),
        trust_p12=truststore(tls.ca, root / "truststore.p12", "PKCS12"),
        app_jks=keystore(
            tls.authority, tls.ca, root / "app.jks", "JKS", "app", own_key_password=True
        ),
        app_p12=keystore(
            tls.authority, tls.ca, root / "app12.p12", "PKCS12", "app12", own_key_password=False
        ),
    )
