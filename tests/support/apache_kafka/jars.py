"""Apache Kafka's broker and tool jars, fetched from Maven Central with Maven and cached.

The jars of one Kafka release (``kafka_2.13`` for the broker and the KRaft controller, with
its runtime dependencies, among them ZooKeeper's server for releases before 4.0,
``kafka-tools`` for the command-line tools, log4j2 behind SLF4J 2 for their logs) are
fetched by :func:`tests.support.maven.copy_dependencies` into
``<cache>/apache-kafka/<version>/lib`` (the cache, ``mvn`` and the locking are described
there).
"""

from __future__ import annotations

import os
import zipfile
from functools import cache
from pathlib import Path

from tests.support.maven import MavenFetchError, cache_root, copy_dependencies, ensure_maven, pom

__all__ = [
    "DEFAULT_VERSION",
    "KafkaFetchError",
    "cache_root",
    "classpath",
    "default_version",
    "ensure_maven",
    "has_class",
    "kafka_lib",
]

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


class KafkaFetchError(MavenFetchError):
    """The jars of a Kafka release could not be fetched (no Maven, no such release)."""


def default_version() -> str:
    """The release the tests run against: ``KAFKA_TXN_APACHE_VERSION`` or the pinned one."""
    return os.environ.get("KAFKA_TXN_APACHE_VERSION") or DEFAULT_VERSION


def _drop_slf4j1_bindings(staged: Path) -> None:
    # SLF4J 1.x bindings of older releases (reload4j from 3.2 on, log4j 1.2 before) would
    # be ignored with a warning by SLF4J 2; log4j2 is the one binding.
    for pattern in ("slf4j-reload4j-*.jar", "slf4j-log4j12-*.jar"):
        for stale in staged.glob(pattern):
            stale.unlink()


def kafka_lib(version: str | None = None) -> Path:
    """The directory holding every jar of Kafka ``version``, fetched on first use."""
    version = version or default_version()
    artifacts = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),
        *_LOGGING,
    ]
    return copy_dependencies(
        cache_root() / "apache-kafka" / version,
        pom(f"apache-kafka-{version}", artifacts),
        what=f"Apache Kafka {version}",
        expect="kafka_2.13-*.jar",
        error=KafkaFetchError,
        prune=_drop_slf4j1_bindings,
    )


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
