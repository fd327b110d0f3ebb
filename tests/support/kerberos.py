"""A real MIT Kerberos KDC for the tests, and an Apache Kafka that authenticates with it.

:class:`Kdc` creates a realm (``kdb5_util create``) in a temporary directory, starts
``krb5kdc`` in the foreground on a free loopback port (TCP and UDP) and adds principals with
``kadmin.local`` (``addprinc -randkey``, ``ktadd``: a keytab per principal). Clients find
it through the ``krb5.conf`` it writes (``KRB5_CONFIG`` for MIT's library,
``-Djava.security.krb5.conf`` for Java); it turns off DNS canonicalisation and reverse
lookups, so the broker's service principal is ``kafka/127.0.0.1@REALM``, the host the
brokers advertise. ``max_life`` (the longest ticket the KDC issues) is a parameter, for the
tests of ticket renewal.

The KDC's programs come from Debian's ``krb5-kdc``, ``krb5-admin-server`` and ``krb5-user``
packages, installed with ``apt-get`` when missing (as :func:`tests.support.maven.ensure_maven`
installs Maven), so a fresh CI machine works.

:func:`kerberos_kafka` is an :class:`~tests.support.apache_kafka.ApacheKafka` whose client
listener is SASL_PLAINTEXT with SCRAM-SHA-256 (the brokers' own and the admin user's
mechanism, also used by librdkafka, whose wheel has no GSSAPI) and GSSAPI: Kafka's
``Krb5LoginModule`` with the broker's keytab, ``sasl.kerberos.service.name=kafka``.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from tests.support.apache_kafka import ApacheKafka, Security, free_port
from tests.support.apache_kafka.cluster import JVM_OPTS

__all__ = [
    "REALM",
    "SERVICE",
    "Kdc",
    "KdcError",
    "ensure_krb5",
    "kerberos_kafka",
    "krb5_jaas",
]

logger = logging.getLogger(__name__)

REALM = "KAFKA-TXN.TEST"
#: The brokers' Kerberos service name (``sasl.kerberos.service.name``).
SERVICE = "kafka"
#: The brokers' host in their service principal: the address they advertise.
BROKER_HOST = "127.0.0.1"
_PACKAGES = ("krb5-kdc", "krb5-admin-server", "krb5-user")
_PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
_START_TIMEOUT_S = 30.0


class KdcError(RuntimeError):
    """The KDC could not be installed, created or started."""


def _program(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/sbin", "/usr/bin", "/sbin"):
        path = Path(directory) / name
        if path.exists():
            return str(path)
    return None


def ensure_krb5() -> dict[str, str]:
    """The MIT Kerberos programs (``krb5kdc``, ``kdb5_util``, ``kadmin.local``, ``kinit``),
    installed from Debian's packages when missing; their paths by name."""
    if any(_program(p) is None for p in _PROGRAMS):
        logger.info("MIT Kerberos KDC not found: installing %s", " ".join(_PACKAGES))
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *_PACKAGES]):
            done = subprocess.run(
                [*sudo, *cmd], env=env, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise KdcError(f"could not install the KDC ({' '.join(cmd)}): {done.stderr}")
    found = {p: _program(p) for p in _PROGRAMS}
    missing = [p for p, path in found.items() if path is None]
    if missing:
        raise KdcError(f"{', '.join(missing)} still missing after installing {_PACKAGES}")
    return {p: path for p, path in found.items() if path is not None}


def krb5_jaas(keytab: Path, principal: str, *, extra: str = "") -> str:
    """A Kafka ``sasl.jaas.config`` value: ``Krb5LoginModule`` with ``keytab``."""
    return (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{keytab}" principal="{principal}"{extra};'
    )


class Kdc:
    """An MIT Kerberos KDC for realm :data:`REALM` on a loopback port (a context manager).

    Parameters
    ----------
    max_life
        The longest ticket lifetime the KDC issues (``kdc.conf``'s ``max_life``, e.g.
        ``"1h"`` or ``"0:00:20"``).
    workdir
        Where the database, keytabs and configuration go (default: a new temporary
        directory, removed at exit).
    """

    def __init__(self, *, max_life: str = "1h", workdir: Path | None = None) -> None:
        self.programs = ensure_krb5()
        self._own_dir = workdir is None
        self.home = workdir or Path(tempfile.mkdtemp(prefix="kdc-"))
        self.port = free_port()
        self.max_life = max_life
        self.krb5_conf = self.home / "krb5.conf"
        self._kdc_conf = self.home / "kdc.conf"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """Environment variables pointing MIT's library and tools at this realm."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self._kdc_conf)}

    def __enter__(self) -> Kdc:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> Kdc:
        """Write the configuration, create the realm's database and start ``krb5kdc``."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f" default_realm = {REALM}\n"
            " dns_lookup_realm = false\n"
            " dns_lookup_kdc = false\n"
            " dns_canonicalize_hostname = false\n"
            " rdns = false\n"
            # TCP only: one port to wait for, no UDP retransmission timers.
            " udp_preference_limit = 1\n"
            f"[realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n"
        )
        self._kdc_conf.write_text(
            "[kdcdefaults]\n"
            f" kdc_listen = 127.0.0.1:{self.port}\n"
            f" kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            f"[realms]\n {REALM} = {{\n"
            f"  database_name = {self.home / 'principal'}\n"
            f"  key_stash_file = {self.home / 'stash'}\n"
            f"  acl_file = {self.home / 'kadm5.acl'}\n"
            f"  max_life = {self.max_life}\n"
            "  max_renewable_life = 0\n"
            " }\n"
            f"[logging]\n kdc = FILE:{self.home / 'kdc.log'}\n"
        )
        # A throwaway master password: the database lives and dies with the test.
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", os.urandom(12).hex(), "-W")
        with (self.home / "krb5kdc.out").open("ab") as out:
            self.process = subprocess.Popen(
                [self.programs["krb5kdc"], "-n"],
                env={**os.environ, **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_listening()
        logger.info("KDC for %s on 127.0.0.1:%d (%s)", REALM, self.port, self.home)
        return self

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise KdcError(f"krb5kdc exited: {self._log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise KdcError(f"krb5kdc did not listen within {_START_TIMEOUT_S} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        text = ""
        for name in ("krb5kdc.out", "kdc.log"):
            path = self.home / name
            if path.exists():
                text += path.read_text(errors="replace")[-2000:]
        return text

    def stop(self) -> None:
        """Stop ``krb5kdc`` and remove the directory if this object made it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._own_dir:
            shutil.rmtree(self.home, ignore_errors=True)

    def _run(self, program: str, *args: str) -> str:
        done = subprocess.run(
            [self.programs[program], *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
            timeout=_START_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise KdcError(f"{program} {args[0]} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def principal(self, name: str) -> str:
        """``name`` with this realm."""
        return name if "@" in name else f"{name}@{REALM}"

    def add_principal(self, name: str, *, max_life: str | None = None) -> Path:
        """Add principal ``name`` (random key) and return a new keytab holding its keys
        (readable by the owner only)."""
        principal = self.principal(name)
        extra = ["-maxlife", max_life] if max_life else []
        self._run("kadmin.local", "-q", " ".join(["addprinc", "-randkey", *extra, principal]))
        keytab = self.home / (principal.split("@")[0].replace("/", "_") + ".keytab")
        self._run("kadmin.local", "-q", f"ktadd -k {keytab} {principal}")
        keytab.chmod(0o600)
        return keytab

    def kinit(self, name: str, keytab: Path, ccache: Path) -> None:
        """Get a ticket-granting ticket for ``name`` from ``keytab`` into the file ``ccache``."""
        self._run("kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", self.principal(name))

    def log_text(self) -> str:
        """The KDC's log (every ticket it issued or refused)."""
        path = self.home / "kdc.log"
        return path.read_text(errors="replace") if path.exists() else ""


def kerberos_kafka(
    kdc: Kdc,
    *,
    admin_password: str,
    authorizer: bool = True,
    super_users: tuple[str, ...] = (),
    config: Mapping[str, str] | None = None,
) -> ApacheKafka:
    """An Apache Kafka node (not started) whose client listener takes SCRAM-SHA-256 and GSSAPI.

    The brokers log in to each other with SCRAM as ``admin`` (``admin_password``, a super
    user); Kerberos clients authenticate with GSSAPI against the broker principal
    ``kafka/127.0.0.1@REALM`` and become ``User:<first component of their principal>``
    (Kafka's default ``sasl.kerberos.principal.to.local.rules``); ``super_users`` are
    allowed everything besides the admin.
    """
    keytab = kdc.add_principal(f"{SERVICE}/{BROKER_HOST}")
    jaas = krb5_jaas(keytab, kdc.principal(f"{SERVICE}/{BROKER_HOST}"))
    security = Security(
        protocol="SASL_PLAINTEXT",
        users={"admin": admin_password},
        mechanisms=("SCRAM-SHA-256", "GSSAPI"),
        authorizer=authorizer,
        super_users=("User:admin", *super_users),
    )
    props = {
        "sasl.kerberos.service.name": SERVICE,
        # Both client listeners of each node (the direct one and the proxied one).
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas,
        "listener.name.proxied.gssapi.sasl.jaas.config": jaas,
        **(config or {}),
    }
    return ApacheKafka(
        security=security,
        config=props,
        jvm_opts=(*JVM_OPTS, f"-Djava.security.krb5.conf={kdc.krb5_conf}"),
    )
