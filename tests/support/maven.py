"""Jars from Maven Central, fetched with Maven into a cache outside the repository.

One place for what the Apache Kafka launcher (:mod:`tests.support.apache_kafka.jars`) and
Spark's built-in Kafka connector (:mod:`tests.support.spark_kafka`) both need: the cache
directory (``$KAFKA_TXN_CACHE``, else ``$XDG_CACHE_HOME/pyspark-kafka-txn``, else
``~/.cache/pyspark-kafka-txn``, shared by every clone and CI run on a machine; Maven's own
``~/.m2`` keeps the downloads), ``mvn`` (installed from Debian's packages when missing, as
``make test`` installs kcat), and :func:`copy_dependencies`: the artifacts a small generated
POM names, resolved with their runtime dependencies by ``mvn dependency:copy-dependencies``
into ``<home>/lib``. A fetch is complete once ``lib/.complete`` exists; one that died half
way is redone; concurrent fetches of one directory are serialised by a file lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

#: ``(groupId, artifactId, version)``.
Artifact = tuple[str, str, str]


class MavenFetchError(RuntimeError):
    """Jars could not be fetched (no Maven, or an artifact that does not resolve)."""


def cache_root() -> Path:
    """Where fetched jars are kept (outside the repository)."""
    explicit = os.environ.get("KAFKA_TXN_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "pyspark-kafka-txn"


def ensure_maven() -> str:
    """The ``mvn`` executable, installed from Debian's packages when missing."""
    found = shutil.which("mvn")
    if found:
        return found
    logger.info("mvn not found: installing Debian's maven package")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "maven"]):
        done = subprocess.run([*sudo, *cmd], env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise MavenFetchError(f"could not install maven ({' '.join(cmd)}): {done.stderr}")
    found = shutil.which("mvn")
    if not found:
        raise MavenFetchError("apt-get installed maven but mvn is still not on PATH")
    return found


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pom(name: str, artifacts: Sequence[Artifact]) -> str:
    """A POM that depends on ``artifacts`` (``name`` identifies it in Maven's output)."""
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in artifacts
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>local.pyspark-kafka-txn</groupId>\n"
        f"  <artifactId>{name}</artifactId>\n"
        "  <version>1</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{body}\n  </dependencies>\n"
        "</project>\n"
    )


def copy_dependencies(
    home: Path,
    pom_xml: str,
    *,
    what: str,
    expect: str,
    error: type[MavenFetchError] = MavenFetchError,
    refresh: bool = False,
    prune: Callable[[Path], None] | None = None,
) -> Path:
    """``<home>/lib`` holding the jars ``pom_xml`` resolves to, fetched on first use.

    Parameters
    ----------
    home
        The cache directory of this set of jars.
    pom_xml
        The POM (:func:`pom`).
    what
        What is fetched, for the log and the error.
    expect
        A glob one of the fetched jars must match (else the fetch counts as failed).
    error
        The exception class to raise.
    refresh
        Ask Maven to check the remote again (``-U``): a failure Maven cached is not reused.
    prune
        Called with the staged directory before it becomes ``lib``.

    Raises
    ------
    MavenFetchError
        (``error``) with Maven's output when it could not resolve them.
    """
    lib = home / "lib"
    stamp = lib / ".complete"
    if stamp.exists():
        return lib
    with locked(home / ".lock"):
        if stamp.exists():
            return lib
        mvn = ensure_maven()
        logger.info("fetching %s from Maven Central into %s", what, lib)
        with tempfile.TemporaryDirectory(dir=home) as tmp:
            pom_path = Path(tmp) / "pom.xml"
            pom_path.write_text(pom_xml)
            staged = Path(tmp) / "lib"
            done = subprocess.run(
                [
                    mvn,
                    "-B",
                    "-q",
                    *(["-U"] if refresh else []),
                    "-f",
                    str(pom_path),
                    "dependency:copy-dependencies",
                    f"-DoutputDirectory={staged}",
                    "-DincludeScope=runtime",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0 or not any(staged.glob(expect)):
                raise error(f"Maven could not fetch {what}:\n{done.stdout}{done.stderr}")
            if prune is not None:
                prune(staged)
            if lib.exists():
                shutil.rmtree(lib)
            staged.rename(lib)
        stamp.write_text(what + "\n")
    return lib
