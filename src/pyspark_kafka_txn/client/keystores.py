"""Java key and trust stores (JKS, PKCS12) as Spark users pass them, read into PEM in memory.

Kafka's Java client takes ``ssl.truststore.location`` / ``.type`` / ``.password``,
``ssl.keystore.location`` / ``.type`` / ``.password`` and ``ssl.key.password``; its default
store type is JKS. Neither librdkafka nor Python's ``ssl`` reads a Java store, so this module
reads them (JKS with ``purejks``, imported as ``jks``; PKCS12 with ``cryptography``) into
PEM text held in memory:

* librdkafka takes it as ``ssl.ca.pem`` / ``ssl.certificate.pem`` / ``ssl.key.pem``
  (:func:`librdkafka_pem`);
* Python's ``ssl`` takes the trusted certificates as ``cadata`` and the key and chain
  through :func:`load_key_store`, which hands OpenSSL an anonymous in-memory file
  (``memfd``; elsewhere an owner-only file in a private temporary directory, removed once
  loaded) holding the key encrypted with a one-time password.

As with Java's ``keystore.type.compat`` (on by default), a store given as JKS may be a
PKCS12 file and the reverse. The store is read where the client is created: the driver and
every executor need it at the same path, as with Spark's built-in connector. Errors name
the option at fault, never a password.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark_kafka_txn.client.errors import ConfigError

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

__all__ = [
    "JAVA_STORE_TYPES",
    "KeyMaterial",
    "StoreSpec",
    "check_stores",
    "java_stores",
    "librdkafka_pem",
    "load_key_store",
]

#: Store types read here (PEM stores are files Python and librdkafka read themselves).
JAVA_STORE_TYPES = ("JKS", "PKCS12")
_TYPES = (*JAVA_STORE_TYPES, "PEM")
_JKS_MAGIC = bytes.fromhex("feedfeed")
_JCEKS_MAGIC = bytes.fromhex("cececece")
_WHERE = "(a key store must be readable at this path on the driver and on every executor)"


@dataclass(frozen=True)
class StoreSpec:
    """A JKS or PKCS12 store as given in the options.

    Attributes
    ----------
    role
        ``truststore`` or ``keystore``.
    location
        The store's path.
    type
        ``JKS`` or ``PKCS12`` (either file format is read, as Java does).
    password
        The store's password (hidden from repr).
    key_password
        ``ssl.key.password`` of a key store (hidden from repr).
    prefix
        How the user's option names begin (``kafka.`` for Spark options), for errors.
    """

    role: str
    location: str
    type: str
    password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    prefix: str = ""

    def option(self, name: str) -> str:
        """``name`` (``location``, ``password``, ...) as the user spelled the option."""
        if name == "key.password":
            return f"'{self.prefix}ssl.key.password'"
        return f"'{self.prefix}ssl.{self.role}.{name}'"

    def trusted_pem(self) -> str:
        """The store's certificates as PEM text (a trust store's CAs)."""
        return _trusted_pem(self, _identity(self))

    def key_material(self) -> KeyMaterial:
        """The store's private key and certificate chain (a key store)."""
        return _key_material(self, _identity(self))


@dataclass(frozen=True)
class KeyMaterial:
    """A private key with its certificate chain, as PEM text (the key is never shown)."""

    chain_pem: str
    key_pem: str = field(repr=False)


def java_stores(
    options: Mapping[str, str], prefix: str = ""
) -> tuple[StoreSpec | None, StoreSpec | None]:
    """The JKS/PKCS12 trust and key stores of Kafka's options (None for PEM or none).

    Parameters
    ----------
    options
        Kafka option names (without ``prefix``) to values.
    prefix
        How the user spelled the names' prefix (``kafka.`` for Spark options), for errors.

    Returns
    -------
    tuple
        The trust store and the key store, each None when absent or of type PEM.

    Raises
    ------
    ConfigError
        Naming the option: an unknown type, a key store without its password, a Java store
        given together with librdkafka's PEM file options, a PEM type on a Java store.
    """
    specs: list[StoreSpec | None] = []
    for role in ("truststore", "keystore"):
        location = options.get(f"ssl.{role}.location")
        kind = options.get(f"ssl.{role}.type", "JKS" if location else "").strip().upper()
        spec = StoreSpec(
            role,
            location or "",
            kind,
            options.get(f"ssl.{role}.password") or None,
            (options.get("ssl.key.password") or None) if role == "keystore" else None,
            prefix,
        )
        if kind and kind not in _TYPES:
            raise ConfigError(
                f"Option {spec.option('type')} must be JKS, PKCS12 or PEM, got {kind!r}"
            )
        if not location or kind == "PEM":
            if location:
                _check_pem(spec)
            specs.append(None)
            continue
        pem_names = (
            ("ssl.ca.location",)
            if role == "truststore"
            else ("ssl.certificate.location", "ssl.key.location")
        )
        given = [n for n in pem_names if options.get(n)]
        if given:
            raise ConfigError(
                f"Option {spec.option('location')} (a {kind} store) and "
                f"'{prefix}{given[0]}' name the same thing: give one of them"
            )
        if role == "keystore" and spec.password is None:
            raise ConfigError(
                f"Option {spec.option('password')} is required with "
                f"{spec.option('location')} of type {kind}"
            )
        specs.append(spec)
    return specs[0], specs[1]


def check_stores(options: Mapping[str, str], prefix: str = "") -> None:
    """The one rule for key and trust stores, shared by every Kafka option translation.

    Reads each JKS/PKCS12 store now (on the driver, at query start), so a wrong type or
    password, a missing file or a store without a key fails before any task runs.

    Parameters
    ----------
    options
        Kafka option names (without ``prefix``) to values.
    prefix
        How the user spelled the names' prefix (``kafka.`` for Spark options), for errors.

    Raises
    ------
    ConfigError
        Naming the option at fault (see :func:`java_stores`, :meth:`StoreSpec.trusted_pem`,
        :meth:`StoreSpec.key_material`).
    """
    trust, key = java_stores(options, prefix)
    if trust is not None:
        trust.trusted_pem()
    if key is not None:
        key.key_material()


def librdkafka_pem(trust: StoreSpec | None, key: StoreSpec | None) -> dict[str, str]:
    """librdkafka's in-memory PEM settings for the stores.

    Returns
    -------
    dict
        ``ssl.ca.pem`` for a trust store; ``ssl.certificate.pem`` and ``ssl.key.pem`` for a
        key store.
    """
    out: dict[str, str] = {}
    if trust is not None:
        out["ssl.ca.pem"] = trust.trusted_pem()
    if key is not None:
        material = key.key_material()
        out["ssl.certificate.pem"] = material.chain_pem
        out["ssl.key.pem"] = material.key_pem
    return out


def load_key_store(context: ssl.SSLContext, key: StoreSpec) -> None:
    """Load the key store's key and chain into ``context`` without a readable file.

    Python's ``ssl`` loads a key only from a file: it gets an anonymous in-memory file
    (Linux ``memfd``; elsewhere a file readable by the owner only, in a private temporary
    directory, removed right after) holding the chain and the key encrypted with a
    one-time password.
    """
    from cryptography.hazmat.primitives import serialization

    material = key.key_material()
    password = secrets.token_urlsafe(32)
    private = serialization.load_pem_private_key(material.key_pem.encode(), None)
    encrypted = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()),
    )
    with _private_file(material.chain_pem.encode() + encrypted) as path:
        context.load_cert_chain(path, password=password)


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path OpenSSL can open holding ``data``, gone when the block ends."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd("kafka-txn-key", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="kafka-txn-")  # mode 0700
    path = os.path.join(directory, "key.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.rmdir(directory)


# -- reading ---------------------------------------------------------------------------


def _identity(spec: StoreSpec) -> tuple[int, int, int, int]:
    """The file's identity (a changed file is read again); a clear error if there is none."""
    try:
        st = os.stat(spec.location)
    except OSError as exc:
        reason = "no such file" if isinstance(exc, FileNotFoundError) else exc.strerror
        raise ConfigError(
            f"Option {spec.option('location')}: cannot read {spec.location!r}: {reason} {_WHERE}"
        ) from None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


def _read(spec: StoreSpec) -> bytes:
    try:
        with open(spec.location, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(
            f"Option {spec.option('location')}: cannot read {spec.location!r}: "
            f"{exc.strerror} {_WHERE}"
        ) from None


def _format_of(data: bytes) -> str:
    """JKS, JCEKS, PKCS12, PEM or '' (unknown), from the file's first bytes."""
    if data[:4] == _JKS_MAGIC:
        return "JKS"
    if data[:4] == _JCEKS_MAGIC:
        return "JCEKS"
    if data[:1] == b"\x30":  # a DER SEQUENCE: PKCS12's PFX
        return "PKCS12"
    if b"-----BEGIN " in data[:4096]:
        return "PEM"
    return ""


def _check_pem(spec: StoreSpec) -> None:
    """A PEM store that is in fact a Java store: name the type option (a missing or
    unreadable file is left to the TLS library, as before)."""
    try:
        with open(spec.location, "rb") as f:
            head = f.read(4)
    except OSError:
        return
    found = _format_of(head)
    if found in ("JKS", "JCEKS", "PKCS12"):
        raise ConfigError(
            f"Option {spec.option('type')} is PEM but {spec.location!r} is a {found} store: "
            f"set it to {found if found != 'JCEKS' else 'JKS or PKCS12 (convert the store)'}"
        )


@dataclass(frozen=True)
class _Store:
    """What a store holds: trusted certificates, and key entries with their chains."""

    certificates: tuple[x509.Certificate, ...]
    keys: tuple[tuple[str, PrivateKeyTypes, tuple[x509.Certificate, ...]], ...]


def _load(spec: StoreSpec) -> _Store:
    data = _read(spec)
    found = _format_of(data)
    if found == "JKS":
        return _load_jks(spec, data)
    if found == "PKCS12":
        return _load_pkcs12(spec, data)
    what = {
        "JCEKS": "a JCEKS store, which kafka_txn does not read (convert it to PKCS12)",
        "PEM": "a PEM file: set it to PEM",
        "": "neither a JKS nor a PKCS12 store",
    }[found]
    raise ConfigError(
        f"Option {spec.option('type')} is {spec.type} but {spec.location!r} is {what}"
    )


def _load_jks(spec: StoreSpec, data: bytes) -> _Store:
    import jks
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_der_private_key

    try:
        store = jks.KeyStore.loads(data, spec.password, try_decrypt_keys=False)
    except jks.KeystoreSignatureException:
        raise ConfigError(
            f"Option {spec.option('password')} does not open the JKS store "
            f"{spec.location!r} (wrong password)"
        ) from None
    except (jks.KeystoreException, ValueError) as exc:
        raise ConfigError(
            f"Option {spec.option('location')}: {spec.location!r} is not a valid JKS store "
            f"({type(exc).__name__})"
        ) from None
    try:
        trusted = [x509.load_der_x509_certificate(e.cert) for e in store.certs.values()]
        keys = []
        for alias, entry in sorted(store.private_keys.items()):
            chain = tuple(x509.load_der_x509_certificate(der) for _, der in entry.cert_chain)
            if spec.role == "truststore":  # Java trusts a key entry's own certificate too
                trusted.extend(chain[:1])
                continue
            entry.decrypt(spec.key_password or spec.password)
            keys.append((alias, load_der_private_key(entry.pkey_pkcs8, None), chain))
    except jks.DecryptionFailureException:
        name = "key.password" if spec.key_password else "password"
        hint = "" if spec.key_password else f" (give its own with {spec.option('key.password')})"
        raise ConfigError(
            f"Option {spec.option(name)} does not open the private key of the JKS store "
            f"{spec.location!r}{hint}"
        ) from None
    except (jks.KeystoreException, ValueError) as exc:
        raise ConfigError(
            f"Option {spec.option('location')}: {spec.location!r} holds an entry kafka_txn "
            f"cannot read ({type(exc).__name__})"
        ) from None
    return _Store(tuple(trusted), tuple(keys))


def _load_pkcs12(spec: StoreSpec, data: bytes) -> _Store:
    from cryptography.hazmat.primitives.serialization import pkcs12

    if spec.key_password is not None and spec.key_password != spec.password:
        # In a PKCS12 store the key is protected by the store's password (keytool refuses
        # another); Java, given another, cannot recover the key either.
        raise ConfigError(
            f"Option {spec.option('key.password')} differs from {spec.option('password')}: "
            f"a PKCS12 store's key has the store's password (leave the former unset)"
        )
    try:
        store = pkcs12.load_pkcs12(data, spec.password.encode() if spec.password else None)
    except ValueError:
        missing = spec.password is None
        raise ConfigError(
            f"Option {spec.option('password')} "
            + ("is required to open " if missing else "does not open ")
            + f"the PKCS12 store {spec.location!r}"
            + ("" if missing else " (wrong password, or a damaged file)")
        ) from None
    certs = tuple(c.certificate for c in store.additional_certs)
    if spec.role == "truststore":
        own = (store.cert.certificate,) if store.cert is not None else ()
        return _Store(own + certs, ())
    if store.key is None or store.cert is None:
        return _Store(certs, ())
    alias = (store.cert.friendly_name or b"").decode(errors="replace")
    return _Store((), ((alias, store.key, (store.cert.certificate, *certs)),))


def _pem(certificates: tuple[x509.Certificate, ...]) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)


@functools.lru_cache(maxsize=16)
def _trusted_pem(spec: StoreSpec, identity: tuple[int, int, int, int]) -> str:
    store = _load(spec)
    if not store.certificates:
        raise ConfigError(
            f"Option {spec.option('location')}: the trust store {spec.location!r} holds no "
            f"certificate"
        )
    return _pem(store.certificates)


@functools.lru_cache(maxsize=16)
def _key_material(spec: StoreSpec, identity: tuple[int, int, int, int]) -> KeyMaterial:
    from cryptography.hazmat.primitives import serialization

    store = _load(spec)
    if not store.keys:
        raise ConfigError(
            f"Option {spec.option('location')}: the key store {spec.location!r} holds no "
            f"private key entry (a key store needs the client's key and certificate chain)"
        )
    if len(store.keys) > 1:
        aliases = ", ".join(alias for alias, _, _ in store.keys)
        raise ConfigError(
            f"Option {spec.option('location')}: the key store {spec.location!r} holds "
            f"{len(store.keys)} private keys ({aliases}); kafka_txn needs a store with one"
        )
    (_, key, chain), *_ = store.keys
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return KeyMaterial(_pem(chain), pem)
