"""Spark's built-in Kafka connector (``format("kafka")``), for the parity tests and the
benchmarks only: the product never loads it.

The jars of ``org.apache.spark:spark-sql-kafka-0-10_2.13`` and of its runtime dependencies
(the token provider, ``kafka-clients``, ``commons-pool2``) are resolved by
:func:`tests.support.maven.copy_dependencies` into ``<cache>/spark-kafka/<version>/lib``
(outside the repository; the cache, ``mvn`` and the locking are described there).
:func:`session_jars` gives the comma-separated list for ``spark.jars``, without
the jars that Spark itself already ships (``zstd-jni``, ``lz4-java``, ``snappy-java``,
``slf4j-api``: two copies of a class on one class path would make the run depend on their
order).

Which version
-------------
The connector of the installed PySpark version is the one to use. Maven Central does not
serve ``spark-sql-kafka-0-10_2.13:4.3.0`` (tried 2026-11-26: "was not found in
repo.maven.apache.org"; Maven Central's newest Spark 4 artifacts here are 4.2.0), so when
the installed version does not resolve, :data:`FALLBACK_VERSION` (the newest release whose
connector resolved here) is used instead, and :func:`connector` says so
(:attr:`Connector.note`, printed in the pytest header of the Spark tests). A failed look-up
is remembered for a day (``<cache>/spark-kafka/<version>/.unavailable``) so that each test
session does not ask Maven again.

Why the older connector runs inside the installed Spark rather than in an environment of
its own: the connector's classes are compiled against Spark's DataSource V2 interfaces,
which are source- and binary-stable between minor releases; the 4.2.0 connector loads and
runs under Spark 4.3.0 (batch reads, ``availableNow`` and ``processingTime`` streams,
admission control, timestamps, headers: the parity suite of
``tests/reader/test_parity_reader.py`` runs on it). A second virtual environment with
PySpark 4.2 would double the JVM start and make the two sides of each comparison run on
different Spark versions, which compares more than the connectors. ``KAFKA_TXN_SPARK_KAFKA``
chooses another connector version explicitly.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pyspark

from tests.support.maven import MavenFetchError, cache_root, copy_dependencies, pom

logger = logging.getLogger(__name__)

GROUP = "org.apache.spark"
ARTIFACT = "spark-sql-kafka-0-10_2.13"

#: The newest PySpark release whose Kafka connector resolved from Maven Central here
#: (2026-11-26), used when the installed release's connector does not resolve.
FALLBACK_VERSION = "4.2.0"

#: How long a failed look-up of a version is believed before Maven is asked again.
_UNAVAILABLE_FOR_S = 24 * 3600


class ConnectorFetchError(MavenFetchError):
    """The built-in Kafka connector's jars could not be fetched."""


@dataclass(frozen=True)
class Connector:
    """The built-in connector the tests load.

    Attributes
    ----------
    version
        The connector's release.
    spark_version
        The installed PySpark release.
    jars
        Its jars, without those Spark already ships.
    """

    version: str
    spark_version: str
    jars: tuple[Path, ...]

    @property
    def note(self) -> str:
        """One line for the test output: which connector, and why if not the installed
        Spark's own."""
        if self.version == self.spark_version:
            return f"built-in Kafka connector: {ARTIFACT} {self.version}"
        return (
            f"built-in Kafka connector: {ARTIFACT} {self.version} under Spark "
            f"{self.spark_version} (Maven Central does not serve {self.spark_version}'s; "
            f"{self.version} is the newest that resolved)"
        )

    @property
    def spark_jars(self) -> str:
        """The value of ``spark.jars``."""
        return ",".join(str(j) for j in self.jars)


def connector_lib(version: str) -> Path:
    """The directory holding the jars of connector ``version``, fetched on first use.

    Raises
    ------
    ConnectorFetchError
        Maven could not resolve it (recorded for a day, see the module docstring).
    """
    home = cache_root() / "spark-kafka" / version
    unavailable = home / ".unavailable"
    recent = unavailable.exists() and (
        time.time() - unavailable.stat().st_mtime < _UNAVAILABLE_FOR_S
    )
    if recent and not (home / "lib" / ".complete").exists():
        raise ConnectorFetchError(
            f"{ARTIFACT} {version} did not resolve (remembered in {unavailable}):\n"
            + unavailable.read_text()
        )
    try:
        lib = copy_dependencies(
            home,
            pom(f"spark-kafka-{version}", [(GROUP, ARTIFACT, version)]),
            what=f"{GROUP}:{ARTIFACT}:{version}",
            expect=f"{ARTIFACT}-*.jar",
            error=ConnectorFetchError,
            refresh=True,  # a failure Maven cached must not outlive our own day
        )
    except ConnectorFetchError as exc:
        unavailable.write_text(str(exc)[-8000:])
        raise
    unavailable.unlink(missing_ok=True)
    return lib


def _artifact_name(jar: Path) -> str:
    """``kafka-clients-3.9.1.jar`` → ``kafka-clients`` (the name without its version)."""
    parts = jar.stem.split("-")
    for i, part in enumerate(parts):
        if part[:1].isdigit():
            return "-".join(parts[:i])
    return jar.stem


def _spark_ships() -> set[str]:
    jars = Path(pyspark.__file__).parent / "jars"
    return {_artifact_name(j) for j in jars.glob("*.jar")}


#: The connectors :func:`connector` gave this process (the Spark tests' summary names them).
LOADED: list[Connector] = []


@cache
def connector() -> Connector:
    """The connector for the installed PySpark: its own release when Maven Central has it,
    else :data:`FALLBACK_VERSION`; ``KAFKA_TXN_SPARK_KAFKA`` names one explicitly.

    Raises
    ------
    ConnectorFetchError
        Neither resolves.
    """
    spark_version = pyspark.__version__
    explicit = os.environ.get("KAFKA_TXN_SPARK_KAFKA")
    if explicit:
        lib = connector_lib(explicit)
        version = explicit
    else:
        try:
            lib = connector_lib(spark_version)
            version = spark_version
        except ConnectorFetchError as exc:
            logger.warning(
                "%s %s is not on Maven Central (%s); using %s",
                ARTIFACT,
                spark_version,
                str(exc).splitlines()[0],
                FALLBACK_VERSION,
            )
            lib = connector_lib(FALLBACK_VERSION)
            version = FALLBACK_VERSION
    ships = _spark_ships()
    jars = tuple(sorted(j for j in lib.glob("*.jar") if _artifact_name(j) not in ships))
    found = Connector(version=version, spark_version=spark_version, jars=jars)
    LOADED.append(found)
    return found


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    found = connector()
    logger.info("%s", found.note)
    for jar in found.jars:
        logger.info("  %s", jar)
