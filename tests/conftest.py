"""Shared fixtures: the Kafka cluster every test session talks to.

``KAFKA_TXN_TARGET`` chooses it (the tests are the same):

* ``embedded`` (default): one embedded cluster per test session;
* ``apache``: one Apache Kafka cluster per test session, started from its published jars
  (:mod:`tests.support.apache_kafka`; ``KAFKA_TXN_APACHE_VERSION``,
  ``KAFKA_TXN_APACHE_NODES`` (1 or 3), ``KAFKA_TXN_APACHE_TV`` (the
  ``transaction.version`` to format with) and ``KAFKA_TXN_APACHE_MODE`` (``kraft`` or
  ``zookeeper``; by default ZooKeeper before Kafka 3.3) choose which);
* ``external``, or ``KAFKA_BOOTSTRAP_SERVERS`` set: a cluster somebody else runs.

On Apache Kafka and external clusters only the tests that use the ``kafka`` fixture run, and
of them not those marked ``embedded_only(reason)`` (they need the embedded cluster's fault
injection or introspection); the others are deselected, never skipped, and the terminal
summary counts them by reason. Tests of the ``kafka3`` fixture (three nodes) get a cluster
of the session's kind of their own (see the fixture); on external clusters they are
deselected. So do the tests of the KIP-939 clusters (``kafka_2pc``, ``kafka_2pc_off``,
``kafka_2pc_acl``: two-phase commit on, off, and behind an authorizer), which on Apache Kafka
run on releases from 4.4 on only, with as many nodes as the session's cluster.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Generator, Iterator

import pytest

from pyspark_kafka_txn.embedded import EmbeddedKafka
from tests.support import two_phase as kip939
from tests.support.apache_kafka import ApacheKafka, Security
from tests.support.clusters import CheckedKafka, assert_no_internal_errors
from tests.support.keystores import JavaStores, java_stores
from tests.support.target import (
    EXTERNAL,
    TARGET,
    KafkaTarget,
    apache_transaction_version,
    transaction_versions,
)

logging.getLogger("pyspark_kafka_txn").setLevel(logging.INFO)

#: The Spark session of every Spark test, its ``spark`` marker and ``local_spark_only``.
pytest_plugins = ["tests.support.spark_session"]

#: Fixtures through which a test talks to a cluster of the session's target kind.
TARGET_FIXTURES = frozenset(
    {"kafka", "kafka_tv1", "kafka_tv2", "kafka3", "kafka_2pc", "kafka_2pc_off", "kafka_2pc_acl"}
)
#: The KIP-939 clusters (:mod:`tests.support.two_phase`): started by the tests.
TWO_PC_FIXTURES = frozenset({"kafka_2pc", "kafka_2pc_off", "kafka_2pc_acl"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "embedded_only(reason): needs the embedded cluster's fault injection or "
        "introspection; deselected on Apache Kafka and external clusters",
    )


#: ``KAFKA_TXN_DRIVER_KILLS=apache``: the tests that kill the Spark driver (``driver_kill``)
#: are left out against the embedded cluster because ``make test`` runs them against Apache
#: Kafka, the reference, in its own leg (each restart costs a minute on 2 cores).
DRIVER_KILLS_ON_APACHE = os.environ.get("KAFKA_TXN_DRIVER_KILLS") == "apache"


def _own_target_fixtures(items: list[pytest.Item]) -> list[str]:
    """Tests whose ``kafka`` (or ``kafka_tv1``, ``kafka_tv2``, ``kafka3``) is not this
    module's fixture: a module or conftest that defines its own of that name would run on
    the embedded cluster while the Apache Kafka leg counts it as an Apache Kafka pass."""
    out: list[str] = []
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in TARGET_FIXTURES & set(getattr(item, "fixturenames", ())):
            defs = info.name2fixturedefs.get(name) or ()
            if defs and defs[-1].func.__module__ != __name__:
                out.append(f"{item.nodeid} ({name} from {defs[-1].func.__module__})")
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shadowed = _own_target_fixtures(items)
    if shadowed:
        raise pytest.UsageError(
            "these tests use a fixture named like the session's cluster but defined "
            "elsewhere (rename it: only tests/conftest.py's choose the cluster): "
            + "; ".join(shadowed[:5])
        )
    if TARGET == "embedded":
        if DRIVER_KILLS_ON_APACHE:
            kills = [i for i in items if i.get_closest_marker("driver_kill") is not None]
            if kills:
                config.hook.pytest_deselected(items=kills)
                items[:] = [i for i in items if i not in kills]
            config.stash[_DESELECTED] = Counter(
                {"driver kills, run in the Apache Kafka leg": len(kills)}
            )
        return
    keep: list[pytest.Item] = []
    dropped: Counter[str] = Counter()
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        marker = item.get_closest_marker("embedded_only")
        if marker is not None:
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
            dropped[f"embedded only: {reason}"] += 1
        elif not TARGET_FIXTURES & names:
            dropped["does not use the session's cluster"] += 1
        elif TARGET == "external" and {"kafka_tv1", "kafka_tv2"} & names:
            dropped["needs a cluster of a chosen transaction version"] += 1
        elif "kafka_tv2" in names and 2 not in transaction_versions():
            dropped["transaction version 2 needs Apache Kafka 4.0+"] += 1
        elif TARGET == "external" and "kafka3" in names:
            dropped["needs a three-node cluster of its own"] += 1
        elif TARGET == "external" and TWO_PC_FIXTURES & names:
            dropped["needs a KIP-939 cluster of its own"] += 1
        elif TARGET == "apache" and TWO_PC_FIXTURES & names and not _kip939_release():
            dropped["KIP-939 is tested on Apache Kafka 4.4.0 and later"] += 1
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    config.stash[_DESELECTED] = dropped


def _kip939_release() -> bool:
    """Whether the session's Apache Kafka release is one KIP-939 was verified on (4.4+)."""
    from tests.support.apache_kafka import default_version

    major, minor = (int(n) for n in default_version().split(".")[:2])
    return (major, minor) >= (4, 4)


_DESELECTED = pytest.StashKey[Counter[str]]()
_RAN = pytest.StashKey[Counter[str]]()
_RAN_BY_MODULE = pytest.StashKey[Counter[str]]()
#: Every Apache Kafka cluster the session's fixtures started: a failed test keeps their logs.
_APACHE = pytest.StashKey[list[ApacheKafka]]()


def _apache_nodes() -> int:
    """The node count of the session's Apache Kafka clusters (``KAFKA_TXN_APACHE_NODES``:
    the session's cluster and the KIP-939 ones alike)."""
    return int(os.environ.get("KAFKA_TXN_APACHE_NODES", "1"))


def pytest_report_header(config: pytest.Config) -> str:
    if TARGET == "apache":
        from tests.support.apache_kafka import default_mode, default_version

        tv = os.environ.get("KAFKA_TXN_APACHE_TV", "default")
        return (
            f"Kafka target: Apache Kafka {default_version()} ({default_mode(default_version())}"
            f"), {_apache_nodes()} node(s), transaction.version {tv}"
        )
    return f"Kafka target: {TARGET}" + (f" ({EXTERNAL})" if EXTERNAL else "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "call" and TARGET != "embedded":
        ran = item.config.stash.setdefault(_RAN, Counter())
        ran[report.outcome] += 1
        by_module = item.config.stash.setdefault(_RAN_BY_MODULE, Counter())
        by_module[item.nodeid.split("::")[0]] += 1
    if report.failed:
        for cluster in item.config.stash.get(_APACHE, []):
            cluster.keep_logs = True
    return report


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if TARGET == "embedded":
        for reason, n in sorted(config.stash.get(_DESELECTED, Counter()).items()):
            terminalreporter.write_line(f"deselected, {reason}: {n}")
        return
    ran = config.stash.get(_RAN, Counter())
    label = pytest_report_header(config).removeprefix("Kafka target: ")
    tr = terminalreporter
    tr.section(f"against {label}")
    tr.write_line("ran: " + ", ".join(f"{n} {k}" for k, n in sorted(ran.items())) or "ran: none")
    for module, n in sorted(config.stash.get(_RAN_BY_MODULE, Counter()).items()):
        tr.write_line(f"  {module}: {n}")
    for reason, n in sorted(config.stash.get(_DESELECTED, Counter()).items()):
        tr.write_line(f"deselected, {reason}: {n}")
    for cluster in config.stash.get(_APACHE, []):
        if cluster.keep_logs:
            tr.write_line(f"broker logs of the failed run kept in {cluster.workdir}")


@pytest.fixture(scope="session")
def embedded_kafka() -> Iterator[EmbeddedKafka]:
    # group_initial_rebalance_delay_ms: Kafka's default is 3000 ms; 300 ms keeps the
    # subscribe() tests fast while still exercising the delayed first rebalance.
    with CheckedKafka(
        transaction_abort_interval_ms=200, group_initial_rebalance_delay_ms=300
    ) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def apache_kafka(request: pytest.FixtureRequest) -> Iterator[ApacheKafka]:
    """The session's Apache Kafka cluster (its logs are kept when a test failed)."""
    cluster = ApacheKafka(
        _apache_nodes(),
        transaction_version=int(tv) if (tv := os.environ.get("KAFKA_TXN_APACHE_TV")) else None,
    )
    request.config.stash.setdefault(_APACHE, []).append(cluster)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


def _cluster_of_version(request: pytest.FixtureRequest, tv: int) -> Iterator[KafkaTarget]:
    """A cluster of the session's kind formatted with transaction version ``tv``: the
    session's own when it has that version, else one more for the session."""
    if TARGET == "apache":
        if apache_transaction_version() == tv:
            yield request.getfixturevalue("kafka")
            return
        apache = ApacheKafka(1, transaction_version=tv)
        request.config.stash.setdefault(_APACHE, []).append(apache)
        with apache:
            yield KafkaTarget(apache.bootstrap_servers, apache=apache)
        return
    with CheckedKafka(transaction_version=tv, transaction_abort_interval_ms=200) as own:
        yield KafkaTarget(own.bootstrap_servers, own)


@pytest.fixture(scope="session")
def kafka_tv1(request: pytest.FixtureRequest) -> Iterator[KafkaTarget]:
    """A cluster of the session's kind on transaction version 1 (no epoch bump per
    transaction, explicit AddPartitionsToTxn)."""
    yield from _cluster_of_version(request, 1)


@pytest.fixture(scope="session")
def kafka_tv2(request: pytest.FixtureRequest) -> Iterator[KafkaTarget]:
    """A cluster of the session's kind on transaction version 2 (KIP-890)."""
    yield from _cluster_of_version(request, 2)


@pytest.fixture(scope="session")
def kafka(request: pytest.FixtureRequest) -> KafkaTarget:
    if TARGET == "external":
        assert EXTERNAL, "KAFKA_TXN_TARGET=external needs KAFKA_BOOTSTRAP_SERVERS"
        return KafkaTarget(EXTERNAL)
    if TARGET == "apache":
        apache: ApacheKafka = request.getfixturevalue("apache_kafka")
        return KafkaTarget(apache.bootstrap_servers, apache=apache)
    embedded = request.getfixturevalue("embedded_kafka")
    return KafkaTarget(embedded.bootstrap_servers, embedded)


@pytest.fixture(scope="session")
def kafka3(request: pytest.FixtureRequest) -> Iterator[KafkaTarget]:
    """Three nodes of the session's kind, for the session's tests that move leaders and
    coordinators: an embedded cluster of three brokers, or Apache Kafka on three nodes
    (the session's version and transaction version) whose brokers also talk to each other
    through the proxies (``inter.broker.listener.name=PROXIED``), so that a test can hold
    back their requests too (the coordinators' WriteTxnMarkers) with
    :meth:`~tests.support.apache_kafka.ApacheKafka.hold`."""
    if TARGET == "apache":
        tv = os.environ.get("KAFKA_TXN_APACHE_TV")
        apache = ApacheKafka(
            3,
            transaction_version=int(tv) if tv else None,
            config={"inter.broker.listener.name": "PROXIED"},
        )
        request.config.stash.setdefault(_APACHE, []).append(apache)
        with apache:
            yield KafkaTarget(apache.bootstrap_servers, apache=apache)
        return
    with CheckedKafka(brokers=3, transaction_abort_interval_ms=200) as own:
        yield KafkaTarget(own.bootstrap_servers, own)


@pytest.fixture(autouse=True, scope="module")
def _close_kept_clients() -> Iterator[None]:
    """Close what this process keeps between reads and writes (the reader's consumers,
    the writer's clients and start checks) after each module, before its clusters stop:
    each module starts with none kept, and none keeps reconnecting to a stopped cluster."""
    yield
    from pyspark_kafka_txn.reader.executor import CONSUMERS
    from pyspark_kafka_txn.writer.common import CLIENTS
    from pyspark_kafka_txn.writer.sink import CHECKED

    CONSUMERS.close_all()
    CLIENTS.close_all()
    CHECKED.close_all()  # a later module's cluster may reuse a port with other settings


def _two_pc_cluster(
    request: pytest.FixtureRequest, *, two_phase: bool, acls: bool = False
) -> Iterator[KafkaTarget]:
    """A KIP-939 cluster of the session's kind (:mod:`tests.support.two_phase`)."""
    if TARGET == "apache":
        tv = os.environ.get("KAFKA_TXN_APACHE_TV")
        security = (
            Security(
                protocol="SASL_PLAINTEXT",
                users=kip939.ACL_USERS,
                mechanisms=("PLAIN",),
                authorizer=True,
                super_users=(f"User:{next(iter(kip939.ACL_USERS))}",),
            )
            if acls
            else None
        )
        apache = ApacheKafka(
            _apache_nodes(),
            security=security,
            transaction_version=int(tv) if tv else None,
            config=kip939.apache_config(two_phase=two_phase),
        )
        request.config.stash.setdefault(_APACHE, []).append(apache)
        with apache:
            yield KafkaTarget(apache.bootstrap_servers, apache=apache)
        return
    settings = (
        kip939.embedded_acl_settings() if acls else kip939.embedded_settings(two_phase=two_phase)
    )
    with CheckedKafka(**settings) as own:
        yield KafkaTarget(own.bootstrap_servers, own)


@pytest.fixture(scope="session")
def kafka_2pc(request: pytest.FixtureRequest) -> Iterator[KafkaTarget]:
    """A cluster of the session's kind serving KIP-939: Apache Kafka with
    ``transaction.two.phase.commit.enable=true`` and ``unstable.api.versions.enable=true``
    (or the embedded cluster with the same), ``transaction.max.timeout.ms`` of
    :data:`tests.support.two_phase.MAX_TIMEOUT_MS`."""
    yield from _two_pc_cluster(request, two_phase=True)


@pytest.fixture(scope="session")
def kafka_2pc_off(request: pytest.FixtureRequest) -> Iterator[KafkaTarget]:
    """As :func:`kafka_2pc` with two-phase commit off: InitProducerId v6 advertised,
    ``Enable2Pc`` refused."""
    yield from _two_pc_cluster(request, two_phase=False)


@pytest.fixture(scope="session")
def kafka_2pc_acl(request: pytest.FixtureRequest) -> Iterator[KafkaTarget]:
    """As :func:`kafka_2pc` behind SASL/PLAIN and an authorizer (Kafka's
    ``StandardAuthorizer`` on Apache Kafka): users :data:`tests.support.two_phase.ACL_USERS`,
    the first a super user, no other ACL."""
    yield from _two_pc_cluster(request, two_phase=True, acls=True)


@pytest.fixture(autouse=True)
def _no_broker_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test during which the embedded broker hit an internal error."""
    embedded = None
    if TARGET == "embedded" and {"embedded_kafka", "kafka"} & set(request.fixturenames):
        embedded = request.getfixturevalue("embedded_kafka")
    yield
    if embedded is not None:
        assert_no_internal_errors(embedded)


@pytest.fixture(scope="session")
def keytool_stores(tmp_path_factory: pytest.TempPathFactory) -> JavaStores:
    """PEM certificates and the JKS/PKCS12 stores keytool makes of them (once a session)."""
    return java_stores(tmp_path_factory.mktemp("java-stores"))
