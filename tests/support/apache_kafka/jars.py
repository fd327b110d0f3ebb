"""Apache Kafka's broker and tool jars, fetched from Maven Central with Maven and cached.

The jars of one Kafka release (``kafka_2.13`` for the broker and the KRaft controller,
``kafka-tools`` for the command-line tools, log4j2 behind SLF4J 2 for their logs) are
resolved by ``mvn dependency:copy-dependencies`` from a small generated POM into
``<cache>/apache-kafka/<version>/lib``. The cache lies outside the repository
(``$KAFKA_TXN_CACHE``, else ``$XDG_CACHE_HOME/pyspark-kafka-txn``, else
``~/.cache/pyspark-kafka-txn``) so every clone and every CI run on a machine shares it, and
Maven's own repository (``~/.m2``) keeps the downloads. When ``mvn`` is missing it is
installed from Debian's packages (``apt-get install maven``), as ``make test`` installs kcat.

A release is complete once its ``lib/.complete`` stamp exists; a fetch that died half way is
redone. Concurrent fetches of one release (two test sessions) are serialised by a file lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

#: The newest Kafka 4.x release that resolved from Maven Central here (2026-11-26).
#: ``KAFKA_TXN_APACHE_VERSION`` overrides it (``make compat`` runs several).
DEFAULT_VERSION = "4.4.0"

#: SLF4J 2 and log4j2: the broker logs to a file through them, whatever the release's own
#: logging dependencies (Kafka 3.9 uses SLF4J 1.7 with reload4j, 4.x log4j2).
_LOGGING = (
    ("org.slf4j", "slf4j-api", "2.0.17"),
    ("org.apache.logging.log4j", "log4j-api", "2.24.3"),
    ("org.apache.logging.log4j", "log4j-core", "2.24.3"),
    ("org.apache.logging.log4j", "log4j-slf4j2-impl", "2.24.3"),
)


class KafkaFetchError(RuntimeError):
    """The jars of a Kafka release could not be fetched (no Maven, no such release)."""


def cache_root() -> Path:
    """Where fetched releases are kept (outside the repository)."""
    explicit = os.environ.get("KAFKA_TXN_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "pyspark-kafka-txn"


def default_version() -> str:
    """The release the tests run against: ``KAFKA_TXN_APACHE_VERSION`` or the pinned one."""
    return os.environ.get("KAFKA_TXN_APACHE_VERSION") or DEFAULT_VERSION


def _pom(version: str) -> str:
    deps = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),
    ]
    deps += list(_LOGGING)
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>local.pyspark-kafka-txn</groupId>\n"
        f"  <artifactId>apache-kafka-{version}</artifactId>\n"
        "  <version>1</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{body}\n  </dependencies>\n"
        "</project>\n"
    )


def ensure_maven() -> str:
    """The ``mvn`` executable, installed from Debian's packages when missing."""
    found = shutil.which("mvn")
    if found:
        return found
    log.info("mvn not found: installing Debian's maven package")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "maven"]):
        done = subprocess.run([*sudo, *cmd], env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise KafkaFetchError(f"could not install maven ({' '.join(cmd)}): {done.stderr}")
    found = shutil.which("mvn")
    if not found:
        raise KafkaFetchError("apt-get installed maven but mvn is still not on PATH")
    return found


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def kafka_lib(version: str | None = None) -> Path:
    """The directory holding every jar of Kafka ``version``, fetched on first use."""
    version = version or default_version()
    home = cache_root() / "apache-kafka" / version
    lib = home / "lib"
    stamp = lib / ".complete"
    if stamp.exists():
        return lib
    with _locked(home / ".lock"):
        if stamp.exists():
            return lib
        mvn = ensure_maven()
        log.info("fetching Apache Kafka %s from Maven Central into %s", version, lib)
        with tempfile.TemporaryDirectory(dir=home) as tmp:
            pom = Path(tmp) / "pom.xml"
            pom.write_text(_pom(version))
            staged = Path(tmp) / "lib"
            done = subprocess.run(
                [
                    mvn,
                    "-B",
                    "-q",
                    "-f",
                    str(pom),
                    "dependency:copy-dependencies",
                    f"-DoutputDirectory={staged}",
                    "-DincludeScope=runtime",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0 or not any(staged.glob("kafka_2.13-*.jar")):
                raise KafkaFetchError(
                    f"Maven could not fetch Apache Kafka {version}:\n{done.stdout}{done.stderr}"
                )
            # SLF4J 1.x bindings of older releases would be ignored with a warning by
            # SLF4J 2; log4j2 is the one binding.
            for stale in staged.glob("slf4j-reload4j-*.jar"):
                stale.unlink()
            if lib.exists():
                shutil.rmtree(lib)
            staged.rename(lib)
        stamp.write_text(version + "\n")
    return lib


def classpath(version: str | None = None) -> str:
    """The JVM class path of Kafka ``version`` (a wildcard over its lib directory)."""
    return str(kafka_lib(version) / "*")


@cache
def _classes(lib: Path) -> frozenset[str]:
    names: set[str] = set()
    for jar in lib.glob("*.jar"):
        if not jar.name.startswith(("kafka", "connect")):
            continue
        with zipfile.ZipFile(jar) as zf:
            names.update(
                n[: -len(".class")].replace("/", ".") for n in zf.namelist() if n.endswith(".class")
            )
    return frozenset(names)


def has_class(version: str, name: str) -> bool:
    """Whether Kafka ``version``'s jars contain the class ``name``."""
    return name in _classes(kafka_lib(version))
