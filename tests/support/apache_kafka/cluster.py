"""A real Apache Kafka cluster for tests and benchmarks: one or three nodes, in KRaft mode or
(releases before 4.0) ZooKeeper mode.

:class:`ApacheKafka` formats KRaft storage for ``nodes`` combined broker+controller nodes on
free loopback ports (in ZooKeeper mode: starts one ZooKeeper server from the ZooKeeper jars
the release depends on, and ``nodes`` brokers that keep their metadata there), starts each
as a JVM from the release's published jars (:mod:`tests.support.apache_kafka.jars`) and
returns once the cluster itself says every broker is registered and unfenced and the
transaction and group coordinators answer; it never sleeps for readiness. A node can be
killed (SIGKILL), hung (SIGSTOP, then SIGCONT) and restarted on its own data. Each node
logs to ``<workdir>/node-<id>/server.log``; :meth:`ApacheKafka.close` removes the work
directory unless ``keep_logs`` was set (the test fixtures set it when a test failed, and
print where the logs are).

Variants (:class:`Security`): PLAINTEXT; SASL_PLAINTEXT with SCRAM-SHA-256/512 (and PLAIN)
users, optionally behind Kafka's ``StandardAuthorizer`` (``AclAuthorizer`` in ZooKeeper mode)
with super users; SASL_PLAINTEXT
with OAUTHBEARER and Kafka's unsecured JWTs (the brokers' default validator; they log in
with ``unsecuredLoginStringClaim_sub``, clients with librdkafka's or Java's unsecured
login: any ``sub`` is accepted, the user names only name principals); SSL with client
certificates required. ``transaction_version`` formats the cluster with that
``transaction.version`` feature level (2 is the 4.x default; 1 is the pre-KIP-890 protocol;
``None`` keeps the release's default). The JVMs are sized for a 2-core machine: a 512 MiB
heap, the serial collector, the C1 compiler only, two network and two I/O threads.

Which mode (:func:`default_mode`): ``KAFKA_TXN_APACHE_MODE`` (``kraft`` or ``zookeeper``),
else ZooKeeper for releases before 3.3, whose KRaft mode was early access or preview (not
for production: KIP-833 marked it production ready in 3.3), and KRaft from 3.3 on. ZooKeeper
mode has no feature levels (no ``transaction_version``); its authorizer is Kafka's
``AclAuthorizer`` and its SCRAM users are created in ZooKeeper before the brokers start.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.apache_kafka.jars import classpath, default_version
from tests.support.apache_kafka.proxy import KafkaProxy, Rule
from tests.support.apache_kafka.tools import ToolNotFoundError, kafka_tool, run_java

log = logging.getLogger(__name__)

#: ApiVersions' API key (the launcher does not import the package under test).
API_VERSIONS_KEY = 18

#: Where the cluster keeps its metadata: a KRaft quorum of the nodes, or ZooKeeper.
KRAFT = "kraft"
ZOOKEEPER = "zookeeper"
MODES = (KRAFT, ZOOKEEPER)

#: The first release whose KRaft mode is production ready (KIP-833, Kafka 3.3); the last
#: release with ZooKeeper mode is the 3.9 line (Kafka 4.0 removed it).
KRAFT_PRODUCTION_READY = (3, 3)
ZOOKEEPER_REMOVED = (4, 0)

#: How long ZooKeeper keeps a broker's session after the broker stops answering: a broker
#: killed with SIGKILL keeps its registration until then, and its restart waits for that.
ZK_SESSION_TIMEOUT_MS = 6000

#: ZooKeeper's settings (a standalone server): a 500 ms tick allows sessions of 1-10 s.
ZOO_CFG = """\
tickTime=500
initLimit=10
syncLimit=5
dataDir={data}
clientPort={port}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,dump
"""

#: JVM options of the ZooKeeper server (a small one: a few znodes).
ZK_JVM_OPTS: tuple[str, ...] = (
    "-Xms32m",
    "-Xmx128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:ActiveProcessorCount=2",
    "-Djava.awt.headless=true",
)


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def default_mode(version: str) -> str:
    """How a cluster of Kafka ``version`` keeps its metadata: ``KAFKA_TXN_APACHE_MODE``
    (``kraft`` or ``zookeeper``), else ZooKeeper before 3.3 (KRaft not yet production
    ready there) and KRaft from 3.3 on.

    Raises
    ------
    ValueError
        For an unknown mode, or ZooKeeper mode on Kafka 4.0 or later (which has none).
    """
    explicit = os.environ.get("KAFKA_TXN_APACHE_MODE")
    if explicit:
        if explicit not in MODES:
            raise ValueError(f"KAFKA_TXN_APACHE_MODE must be one of {MODES}, not {explicit!r}")
        mode = explicit
    else:
        mode = KRAFT if _release(version) >= KRAFT_PRODUCTION_READY else ZOOKEEPER
    if mode == ZOOKEEPER and _release(version) >= ZOOKEEPER_REMOVED:
        raise ValueError(f"Kafka {version} has no ZooKeeper mode (removed in 4.0)")
    return mode


#: How long a node may take to start (JVM start, log recovery, joining the quorum) before
#: the launcher gives up; generous for a loaded 2-core machine.
START_TIMEOUT_S = 120.0

#: JVM options sized for a 2-core machine (tests; benchmarks may pass their own).
JVM_OPTS: tuple[str, ...] = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:ActiveProcessorCount=2",
    "-Djava.awt.headless=true",
)

#: Broker settings every cluster gets: small thread pools, internal topics that one node
#: can host, quick transaction clean-up (the embedded test cluster aborts timed-out
#: transactions every 200 ms), and no topic auto-creation (as the embedded cluster).
BASE_CONFIG: dict[str, str] = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.replica.fetchers": "1",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(8 << 20),
    # Kafka's default of 50 partitions for __consumer_offsets and __transaction_state,
    # as the embedded cluster: which partition a group or transactional id lands on shows
    # in DescribeTransactions (tests/broker/test_differential.py compares it).
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "300",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
    "controlled.shutdown.enable": "true",
    "log.segment.bytes": str(16 << 20),
}

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class KafkaLaunchError(RuntimeError):
    """A node did not start or the cluster did not become ready; the message names the
    node and ends with the tail of its log."""


@dataclass(frozen=True)
class Security:
    """How clients reach the brokers.

    Parameters
    ----------
    protocol
        ``PLAINTEXT``, ``SASL_PLAINTEXT`` or ``SSL`` (the client listener; the controller
        listener is always PLAINTEXT on loopback).
    users
        SASL users and passwords (SCRAM credentials are created at format time; PLAIN
        users are listed in the broker's JAAS config; OAUTHBEARER ignores the passwords).
        The first user is the brokers' own.
    mechanisms
        The SASL mechanisms the brokers accept; the first is the inter-broker one.
    authorizer
        Run Kafka's ``StandardAuthorizer`` (no ACL means no access).
    super_users
        Principals allowed everything (``User:<name>``; a certificate's principal is
        :func:`cert_principal`); the brokers' principal is added (on SSL: their
        certificate's DN, so ``ssl.principal.mapping.rules`` must leave it unchanged).
    tls_dir
        For SSL: a directory of :func:`tests.support.tls.tls_files` (``ca.pem``,
        ``server.pem``, ``client.pem``); clients must present a certificate signed by the
        CA, and :meth:`ApacheKafka.client_config` and :meth:`ApacheKafka.admin_properties`
        present ``client.pem``.
    """

    protocol: str = "PLAINTEXT"
    users: Mapping[str, str] = field(default_factory=dict)
    mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    authorizer: bool = False
    super_users: tuple[str, ...] = ()
    tls_dir: Path | None = None

    @property
    def listener(self) -> str:
        return self.protocol

    def broker_user(self) -> tuple[str, str]:
        name = next(iter(self.users))
        return name, self.users[name]


#: Ports this process handed out already (a node binds its ports only when it starts).
_HANDED_OUT: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback TCP port nobody listens on at the moment of asking, **below the
    ephemeral range**: a node's port stays free while the node is killed and restarted, and
    a port the kernel hands out as the local end of outgoing connections (Spark's, the
    clients') could be taken in that window, so that the restarted node cannot bind it
    (seen as a chaos seed's node exiting at restart)."""
    low = _ephemeral_low()
    for _ in range(1000):
        port = random.randrange(10000, low)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise KafkaLaunchError(f"no free port found in [10000, {low})")


#: The attribute names of RFC 2253 (Java prints any other attribute as its OID).
_RFC2253_NAMES = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.1": "UID",
    "0.9.2342.19200300.100.1.25": "DC",
}


def cert_principal(pem: Path) -> str:
    """The principal Kafka gives a client presenting the first certificate in ``pem``
    (without ``ssl.principal.mapping.rules``): ``User:`` and the subject's DN as Java's
    ``X500Principal.getName()`` prints it (RFC 2253, last RDN first, and every one of
    ``,=+<>#;\\"`` escaped with a backslash, not only where RFC 2253 requires it).

    Raises
    ------
    ValueError
        For an attribute outside RFC 2253's names (Java would print its OID and a hex
        encoding, which is not reproduced here).
    """
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(pem.read_bytes())
    rdns = []
    for rdn in reversed(cert.subject.rdns):
        parts = []
        for attr in rdn:
            name = _RFC2253_NAMES.get(attr.oid.dotted_string)
            if name is None:
                raise ValueError(f"{pem}: attribute {attr.oid.dotted_string} has no RFC 2253 name")
            value = str(attr.value)
            escaped = "".join("\\" + c if c in ',=+<>#;\\"' else c for c in value)
            if escaped.startswith(" "):
                escaped = "\\" + escaped
            if escaped.endswith(" ") and not escaped.endswith("\\ "):
                escaped = escaped[:-1] + "\\ "
            parts.append(f"{name}={escaped}")
        rdns.append("+".join(parts))
    return "User:" + ",".join(rdns)


def _properties(props: Mapping[str, str]) -> str:
    """``props`` as a ``java.util.Properties`` file: a backslash in a value is doubled (the
    loader reads ``\\#`` as ``#``, and a certificate's principal in ``super.users`` holds
    Java's ``\\#`` escapes), a line break is written ``\\n``, a leading blank is escaped."""

    def escape(value: str) -> str:
        value = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return "\\" + value if value[:1] in (" ", "\t", "\f") else value

    return "".join(f"{k}={escape(v)}\n" for k, v in props.items())


def _jaas(module: str, user: str, password: str, extra: str = "") -> str:
    return f'{module} required username="{user}" password="{password}"{extra};'


def _oauth_jaas(user: str) -> str:
    return (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'unsecuredLoginStringClaim_sub="{user}";'
    )


@dataclass
class Node:
    """One combined broker+controller JVM."""

    node_id: int
    port: int
    controller_port: int
    home: Path
    #: The broker's PROXIED listener, and the port of the proxy in front of it.
    proxied_port: int = 0
    proxy_port: int = 0
    proxy: KafkaProxy | None = None
    process: subprocess.Popen[bytes] | None = None
    #: Set while the node is down on purpose (killed, stopped): not a launch failure.
    expected_down: bool = False

    @property
    def log_file(self) -> Path:
        return self.home / "server.log"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for f in (self.home / "stdout.log", self.log_file):
            if f.exists():
                text += "".join(f.read_text(errors="replace").splitlines(True)[-lines:])
        return text


class ApacheKafka:
    """A cluster of Apache Kafka ``version`` with ``nodes`` nodes: combined KRaft nodes, or
    brokers beside one ZooKeeper server.

    Parameters
    ----------
    nodes
        1 or 3 (in KRaft mode every node is a broker and a controller voter).
    version
        The Kafka release (default: :func:`~tests.support.apache_kafka.jars.default_version`).
    mode
        :data:`KRAFT` or :data:`ZOOKEEPER` (default: :func:`default_mode` of the release).
    security
        The client listener's protocol, users and authorizer.
    transaction_version
        The ``transaction.version`` feature level to format with (``None``: the default;
        KRaft mode only).
    config
        Broker settings on top of :data:`BASE_CONFIG`.
    jvm_opts
        The JVM options of each node (default :data:`JVM_OPTS`).
    workdir
        Where the nodes keep data and logs (default: a new temporary directory).
    """

    def __init__(
        self,
        nodes: int = 1,
        *,
        version: str | None = None,
        mode: str | None = None,
        security: Security | None = None,
        transaction_version: int | None = None,
        config: Mapping[str, str] | None = None,
        jvm_opts: Sequence[str] = JVM_OPTS,
        workdir: Path | None = None,
    ) -> None:
        if nodes not in (1, 3):
            raise ValueError(f"nodes must be 1 or 3, not {nodes}")
        self.version = version or default_version()
        self.mode = mode or default_mode(self.version)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        if self.mode == ZOOKEEPER and transaction_version is not None:
            raise ValueError("ZooKeeper mode has no feature levels: transaction_version=None")
        self.security = security or Security()
        self.transaction_version = transaction_version
        self.extra_config = dict(config or {})
        self.jvm_opts = tuple(jvm_opts)
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="apache-kafka-"))
        self.cluster_id = ""
        self.keep_logs = False
        replication = str(min(nodes, 3))
        self._internal = {
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": "2" if nodes == 3 else "1",
            "default.replication.factor": replication,
            "min.insync.replicas": "2" if nodes == 3 else "1",
        }
        self.nodes = [
            Node(
                i,
                free_port(),
                free_port(),
                self.workdir / f"node-{i}",
                proxied_port=free_port(),
                proxy_port=free_port(),
            )
            for i in range(1, nodes + 1)
        ]
        #: ZooKeeper mode: the server's client port and its process.
        self.zk_port = free_port() if self.mode == ZOOKEEPER else 0
        self.zookeeper: subprocess.Popen[bytes] | None = None

    # -- addresses and client settings -------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def proxied_bootstrap_servers(self) -> str:
        """Bootstrap through the proxies: this client's requests can be held or delayed
        (:meth:`hold`, :meth:`delay`)."""
        return ",".join(f"127.0.0.1:{n.proxy_port}" for n in self.nodes)

    def hold(self, api_key: int, count: int | None = None) -> list[Rule]:
        """Hold back requests of ``api_key`` sent through the proxies, until :meth:`clear`."""
        return [self._proxy(n).hold(api_key, count) for n in self.nodes]

    def delay(self, api_key: int, seconds: float, count: int | None = None) -> list[Rule]:
        """Delay requests of ``api_key`` sent through the proxies (``count`` per node)."""
        return [self._proxy(n).delay(api_key, seconds, count) for n in self.nodes]

    def drop_connections(self) -> int:
        """Close every client connection through the proxies (as a broker closes idle
        ones); the number closed. New connections are accepted as before."""
        return sum(self._proxy(n).drop_connections() for n in self.nodes)

    def clear(self) -> None:
        """Lift every proxy rule; held requests are dropped with their connections."""
        for node in self.nodes:
            if node.proxy is not None:
                node.proxy.clear()

    @staticmethod
    def _proxy(node: Node) -> KafkaProxy:
        assert node.proxy is not None, "the cluster is not started"
        return node.proxy

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def client_config(self, user: str | None = None) -> dict[str, str]:
        """librdkafka settings of a client of this cluster (``user``: a SASL user)."""
        conf = {"bootstrap.servers": self.bootstrap_servers}
        sec = self.security
        if sec.protocol.startswith("SASL"):
            name = user or next(iter(sec.users))
            conf |= {"security.protocol": sec.protocol, "sasl.mechanism": sec.mechanisms[0]}
            if sec.mechanisms[0] == "OAUTHBEARER":
                # librdkafka's own unsecured JWT for ``name`` (independent of kafka_txn's).
                conf |= {
                    "enable.sasl.oauthbearer.unsecure.jwt": "true",
                    "sasl.oauthbearer.config": f"principal={name}",
                }
            else:
                conf |= {"sasl.username": name, "sasl.password": sec.users[name]}
        elif sec.protocol == "SSL":
            assert sec.tls_dir is not None
            conf |= {
                "security.protocol": "SSL",
                "ssl.ca.location": str(sec.tls_dir / "ca.pem"),
                "ssl.certificate.location": str(sec.tls_dir / "client.pem"),
                "ssl.key.location": str(sec.tls_dir / "client.pem"),
            }
        return conf

    def admin_properties(self, user: str | None = None) -> Path:
        """A Java client properties file (``--command-config`` of Kafka's tools)."""
        sec = self.security
        lines = [f"security.protocol={sec.protocol}"]
        if sec.protocol.startswith("SASL"):
            name = user or next(iter(sec.users))
            mech = sec.mechanisms[0]
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if mech == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            jaas = (
                _oauth_jaas(name) if mech == "OAUTHBEARER" else _jaas(module, name, sec.users[name])
            )
            lines += [f"sasl.mechanism={mech}", "sasl.jaas.config=" + jaas]
        elif sec.protocol == "SSL":
            assert sec.tls_dir is not None
            lines += self._java_tls("client")
        path = self.workdir / f"client-{user or 'default'}.properties"
        path.write_text(_properties(dict(line.partition("=")[::2] for line in lines)))
        return path

    def create_topic(
        self, name: str, partitions: int = 1, *, user: str | None = None, **config: str
    ) -> None:
        """Create topic ``name`` as ``user`` (on a secured cluster; the brokers' own user by
        default) and return once every partition answers ListOffsets on its leader (Kafka
        creates them asynchronously: right after CreateTopics the metadata may name no
        leader yet, and a leader may answer NOT_LEADER_OR_FOLLOWER for a moment)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        conf = {**self.client_config(user), "log_level": 0}
        topic = NewTopic(name, partitions, min(len(self.nodes), 3), config=config)
        admin = AdminClient(conf)  # referenced until its future completes
        admin.create_topics([topic])[name].result(START_TIMEOUT_S)
        wait_partitions_ready(conf, name, partitions)

    # -- configuration ------------------------------------------------------------------

    def _java_tls(self, role: str) -> list[str]:
        sec = self.security
        assert sec.tls_dir is not None
        return [
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={_pkcs8(sec.tls_dir / f'{role}.pem', self.workdir)}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={sec.tls_dir / 'ca.pem'}",
            "ssl.endpoint.identification.algorithm=",
        ]

    def _metadata_properties(self, node: Node) -> dict[str, str]:
        """The settings that differ between KRaft and ZooKeeper mode."""
        listener = self.security.listener
        clients = f"{listener}://127.0.0.1:{node.port},PROXIED://127.0.0.1:{node.proxied_port}"
        protocols = f"{listener}:{self.security.protocol},PROXIED:{self.security.protocol}"
        if self.mode == ZOOKEEPER:
            return {
                "broker.id": str(node.node_id),
                "zookeeper.connect": f"127.0.0.1:{self.zk_port}",
                "zookeeper.session.timeout.ms": str(ZK_SESSION_TIMEOUT_MS),
                "listeners": clients,
                "listener.security.protocol.map": protocols,
            }
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        return {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"{clients},CONTROLLER://127.0.0.1:{node.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": f"{protocols},CONTROLLER:PLAINTEXT",
        }

    def _server_properties(self, node: Node) -> str:
        sec = self.security
        listener = sec.listener
        props: dict[str, str] = {
            **self._metadata_properties(node),
            "advertised.listeners": f"{listener}://127.0.0.1:{node.port},"
            f"PROXIED://127.0.0.1:{node.proxy_port}",
            "inter.broker.listener.name": listener,
            "log.dirs": str(node.data_dir),
            **BASE_CONFIG,
            **self._internal,
        }
        for name in (listener, "PROXIED"):
            props |= self._listener_security(name.lower())
        if sec.authorizer:
            props["authorizer.class.name"] = (
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
                if self.mode == KRAFT
                else "kafka.security.authorizer.AclAuthorizer"
            )
            # The controller listener is PLAINTEXT: its principal is ANONYMOUS.
            supers = ["User:ANONYMOUS", *sec.super_users]
            if sec.protocol.startswith("SASL"):
                supers.append(f"User:{sec.broker_user()[0]}")
            elif sec.protocol == "SSL":
                # Brokers talk to each other (and to themselves: AddPartitionsToTxn
                # verification, transaction markers) with their own certificate.
                assert sec.tls_dir is not None
                supers.append(cert_principal(sec.tls_dir / "server.pem"))
            props["super.users"] = ";".join(dict.fromkeys(supers))
            props["allow.everyone.if.no.acl.found"] = "false"
        props.update(self.extra_config)
        return _properties(props)

    def _listener_security(self, name: str) -> dict[str, str]:
        sec = self.security
        prefix = f"listener.name.{name}"
        props: dict[str, str] = {}
        if sec.protocol.startswith("SASL"):
            user, password = sec.broker_user()
            props["sasl.enabled.mechanisms"] = ",".join(sec.mechanisms)
            props["sasl.mechanism.inter.broker.protocol"] = sec.mechanisms[0]
            for mech in sec.mechanisms:
                if mech == "OAUTHBEARER":
                    # Kafka's defaults: unsecured login for the brokers' own connections,
                    # OAuthBearerUnsecuredValidatorCallbackHandler for every client's token.
                    props[f"{prefix}.oauthbearer.sasl.jaas.config"] = _oauth_jaas(user)
                elif mech == "PLAIN":
                    users = "".join(f' user_{u}="{p}"' for u, p in sec.users.items())
                    module = "org.apache.kafka.common.security.plain.PlainLoginModule"
                    props[f"{prefix}.plain.sasl.jaas.config"] = _jaas(module, user, password, users)
                else:
                    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
                    props[f"{prefix}.{mech.lower()}.sasl.jaas.config"] = _jaas(
                        module, user, password
                    )
        elif sec.protocol == "SSL":
            for line in self._java_tls("server"):
                key, _, value = line.partition("=")
                props[f"{prefix}.{key}"] = value
            props[f"{prefix}.ssl.client.auth"] = "required"
        return props

    # -- processes ----------------------------------------------------------------------

    def java(self, main: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run a class of the release's jars to completion (a tool, the storage format)."""
        kw.setdefault("timeout", START_TIMEOUT_S)
        return run_java(main, *args, version=self.version, log4j=self._tool_log4j(), **kw)

    def tool(
        self, script: str, *args: str, user: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's command-line tools (``kafka-acls``, ``kafka-transactions``, ...)
        against this cluster, as ``user`` on a secured cluster
        (:func:`~tests.support.apache_kafka.tools.kafka_tool` with its client properties)."""
        try:
            return kafka_tool(
                script,
                self.bootstrap_servers,
                *args,
                version=self.version,
                command_config=self.admin_properties(user),
                log4j=self._tool_log4j(),
                timeout_s=START_TIMEOUT_S,
            )
        except ToolNotFoundError as exc:
            raise KafkaLaunchError(str(exc)) from None

    def _tool_log4j(self) -> Path:
        path = self.workdir / "tools-log4j2.properties"
        if not path.exists():
            path.write_text("status = warn\nrootLogger.level = WARN\n")
        return path

    def _format(self) -> None:
        for node in self.nodes:
            node.home.mkdir(parents=True, exist_ok=True)
            (node.home / "server.properties").write_text(self._server_properties(node))
            (node.home / "log4j2.properties").write_text(LOG4J2.format(log=node.log_file))
        if self.mode == ZOOKEEPER:
            self._zookeeper_users()
            return
        self.cluster_id = self.java("kafka.tools.StorageTool", "random-uuid").stdout.strip()
        for node in self.nodes:
            args = ["format", "-t", self.cluster_id, "-c", str(node.home / "server.properties")]
            for mech in (
                self.security.mechanisms if self.security.protocol.startswith("SASL") else ()
            ):
                if mech.startswith("SCRAM"):
                    for user, password in self.security.users.items():
                        args += ["--add-scram", f"{mech}=[name={user},password={password}]"]
            if self.transaction_version is not None:
                args += ["--feature", f"transaction.version={self.transaction_version}"]
            done = self.java("kafka.tools.StorageTool", *args)
            if done.returncode != 0:
                raise KafkaLaunchError(
                    f"formatting node {node.node_id} failed:\n{done.stdout}{done.stderr}"
                )

    def _spawn(self, node: Node) -> None:
        cmd = [
            "java",
            *self.jvm_opts,
            f"-Dlog4j2.configurationFile={node.home / 'log4j2.properties'}",
            "-cp",
            classpath(self.version),
            "kafka.Kafka",
            str(node.home / "server.properties"),
        ]
        with (node.home / "stdout.log").open("ab") as out:
            node.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    # -- ZooKeeper mode ------------------------------------------------------------------

    @property
    def zk_home(self) -> Path:
        return self.workdir / "zookeeper"

    def _start_zookeeper(self) -> None:
        """Start the ZooKeeper server (standalone, from the release's ZooKeeper jars) and
        return once it answers ``srvr``."""
        home = self.zk_home
        home.mkdir(parents=True, exist_ok=True)
        (home / "zoo.cfg").write_text(ZOO_CFG.format(data=home / "data", port=self.zk_port))
        (home / "log4j2.properties").write_text(LOG4J2.format(log=home / "server.log"))
        cmd = [
            "java",
            *ZK_JVM_OPTS,
            f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}",
            "-cp",
            classpath(self.version),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(home / "zoo.cfg"),
        ]
        with (home / "stdout.log").open("ab") as out:
            self.zookeeper = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Zookeeper version" not in self._zk_command("srvr"):
            if self.zookeeper.poll() is not None or time.monotonic() > deadline:
                tail = (home / "stdout.log").read_text(errors="replace")[-4000:]
                raise KafkaLaunchError(f"ZooKeeper did not start:\n{tail}")
            time.sleep(0.1)

    def _zk_command(self, word: str) -> str:
        """ZooKeeper's answer to a four-letter command (empty if it does not answer)."""
        try:
            with socket.create_connection(("127.0.0.1", self.zk_port), timeout=2) as sock:
                sock.sendall(word.encode())
                chunks = []
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
                return b"".join(chunks).decode(errors="replace")
        except OSError:
            return ""

    def _wait_unregistered(self, node: Node) -> None:
        """Wait until ZooKeeper dropped the registration of a broker that was killed (its
        session expires after :data:`ZK_SESSION_TIMEOUT_MS`): a broker restarted while
        ``/brokers/ids/<id>`` still exists refuses to start."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while f"/brokers/ids/{node.node_id}\n" in self._zk_command("dump"):
            if time.monotonic() > deadline:
                raise KafkaLaunchError(f"broker {node.node_id} still registered in ZooKeeper")
            time.sleep(0.2)

    def _zookeeper_users(self) -> None:
        """Create the SCRAM users in ZooKeeper (before the brokers start, which read them
        there; KRaft mode writes them at format time instead)."""
        sec = self.security
        scram = [m for m in sec.mechanisms if m.startswith("SCRAM")]
        if not sec.protocol.startswith("SASL") or not scram:
            return
        for user, password in sec.users.items():
            credentials = ",".join(f"{m}=[password={password}]" for m in scram)
            done = self.java(
                "kafka.admin.ConfigCommand",
                "--zookeeper",
                f"127.0.0.1:{self.zk_port}",
                "--alter",
                "--add-config",
                credentials,
                "--entity-type",
                "users",
                "--entity-name",
                user,
            )
            if done.returncode != 0:
                # Not the command line: it holds the password.
                raise KafkaLaunchError(f"creating SCRAM user {user} failed:\n{done.stderr}")

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> ApacheKafka:
        """Format (or, in ZooKeeper mode, start ZooKeeper), start every node and wait until
        the cluster is ready."""
        classpath(self.version)  # fetch before timing anything
        try:
            if self.mode == ZOOKEEPER:
                self._start_zookeeper()
            self._format()
            for node in self.nodes:
                node.proxy = KafkaProxy(node.proxy_port, ("127.0.0.1", node.proxied_port))
                self._spawn(node)
            self.wait_ready()
            self._wait_coordinators()
        except BaseException:
            # No process outlives a failed start (a ``with`` block never reaches
            # ``__exit__`` then); the logs stay for the error's reader.
            self.keep_logs = True
            self.close()
            raise
        log.info(
            "Apache Kafka %s up (%s): %d node(s) at %s (%s)",
            self.version,
            self.mode,
            len(self.nodes),
            self.bootstrap_servers,
            self.workdir,
        )
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Return once every live node is a registered broker (asked of the cluster with
        Metadata) and answers requests itself (ApiVersions on its own listener: a node
        restarted after SIGKILL is still listed by the others until its session expires,
        and opens its listener only once unfenced)."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        want = {n.node_id for n in self.nodes if n.alive}
        conf = {**self.client_config(), "log_level": 0}
        conf["bootstrap.servers"] = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes if n.alive)
        admin = AdminClient(conf)
        last: object = None
        while True:
            self._check_alive()
            try:
                md = admin.list_topics(timeout=5)
                brokers = set(md.brokers)
                silent = [n.node_id for n in self.nodes if n.alive and not self._answers(n)]
                if want <= brokers and not silent:
                    return
                last = (
                    f"brokers in metadata: {sorted(brokers)}, waiting for {sorted(want)}; "
                    f"not answering yet: {silent}"
                )
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last = exc
            if time.monotonic() > deadline:
                raise KafkaLaunchError(
                    f"cluster not ready after {timeout_s:.0f} s ({last}):\n"
                    + "\n".join(n.log_tail(20) for n in self.nodes)
                )
            time.sleep(0.2)

    def _answers(self, node: Node) -> bool:
        """Whether ``node`` answers an ApiVersions v0 request on its client listener."""
        try:
            with socket.create_connection(("127.0.0.1", node.port), timeout=2) as raw:
                if self.security.protocol != "SSL":
                    return _api_versions_ok(raw)
                assert self.security.tls_dir is not None
                tls = ssl.create_default_context(cafile=str(self.security.tls_dir / "ca.pem"))
                tls.check_hostname = False
                tls.load_cert_chain(str(self.security.tls_dir / "client.pem"))
                with tls.wrap_socket(raw) as wrapped:
                    return _api_versions_ok(wrapped)
        except (OSError, ssl.SSLError):
            return False

    def _wait_coordinators(self) -> None:
        # A transactional producer's first InitProducerId creates __transaction_state and
        # waits for its coordinator; a group's offset fetch does the same for
        # __consumer_offsets (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until the
        # coordinator has loaded: asked again). Done once here, so no test pays for it.
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

        conf = {**self.client_config(), "log_level": 0}
        # librdkafka's default timeout (60 s) must not exceed the broker's maximum.
        timeout_ms = min(60_000, int(self.extra_config.get("transaction.max.timeout.ms", 60_000)))
        producer = Producer(
            {
                **conf,
                "transactional.id": "apache-kafka-launcher-ready",
                "transaction.timeout.ms": timeout_ms,
            }
        )
        producer.init_transactions(START_TIMEOUT_S)
        consumer = Consumer({**conf, "group.id": "apache-kafka-launcher-ready"})
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while True:
                try:
                    consumer.committed([TopicPartition("__consumer_offsets", 0)], timeout=10)
                    return
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            consumer.close()

    def _check_alive(self) -> None:
        if self.zookeeper is not None and self.zookeeper.poll() is not None:
            tail = (self.zk_home / "stdout.log").read_text(errors="replace")[-4000:]
            raise KafkaLaunchError(f"ZooKeeper exited with {self.zookeeper.returncode}:\n{tail}")
        for node in self.nodes:
            exited = node.process is not None and node.process.poll() is not None
            if exited and not node.expected_down:
                assert node.process is not None
                raise KafkaLaunchError(
                    f"node {node.node_id} exited with {node.process.returncode}:\n"
                    + node.log_tail()
                )

    # -- faults -------------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """SIGKILL a node (no controlled shutdown, no flush)."""
        node = self.node(node_id)
        assert node.process is not None and node.alive, f"node {node_id} is not running"
        node.expected_down = True
        node.process.kill()
        node.process.wait()

    def pause(self, node_id: int) -> None:
        """SIGSTOP a node: it keeps its sockets open and answers nothing (a hung broker)."""
        node = self.node(node_id)
        assert node.process is not None and node.alive
        os.kill(node.process.pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        """SIGCONT a node stopped by :meth:`pause`."""
        node = self.node(node_id)
        assert node.process is not None
        os.kill(node.process.pid, signal.SIGCONT)

    def stop_node(self, node_id: int, timeout_s: float = 60.0) -> None:
        """Stop a node cleanly (SIGTERM: controlled shutdown)."""
        node = self.node(node_id)
        if not node.alive:
            return
        assert node.process is not None
        node.expected_down = True
        node.process.terminate()
        try:
            node.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            node.process.kill()
            node.process.wait()

    def restart(self, node_id: int, *, wait: bool = True) -> None:
        """Start a stopped or killed node again on its data (same ports, same id)."""
        node = self.node(node_id)
        if node.alive:
            self.stop_node(node_id)
        node.expected_down = False
        if self.mode == ZOOKEEPER:
            self._wait_unregistered(node)
        self._spawn(node)
        if wait:
            self.wait_ready()

    def close(self) -> None:
        """Stop every node (a paused one is resumed first) and remove the work directory
        unless :attr:`keep_logs` is set."""
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None:
                continue
            node.expected_down = True
            os.kill(node.process.pid, signal.SIGCONT)
            node.process.terminate()
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(30)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        for node in self.nodes:
            if node.proxy is not None:
                node.proxy.close()
        if self.zookeeper is not None and self.zookeeper.poll() is None:
            self.zookeeper.terminate()
            try:
                self.zookeeper.wait(30)
            except subprocess.TimeoutExpired:
                self.zookeeper.kill()
                self.zookeeper.wait()
        if self.keep_logs:
            log.warning("Apache Kafka logs kept in %s", self.workdir)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.keep_logs = True
        self.close()


def wait_partitions_ready(
    conf: Mapping[str, Any], topic: str, partitions: int, timeout_s: float = START_TIMEOUT_S
) -> None:
    """Return once every partition of a new topic (or one that grew) answers ListOffsets on
    its leader, asked with the librdkafka settings ``conf``. Kafka creates partitions
    asynchronously: right after CreateTopics or CreatePartitions the metadata may name no
    leader yet (or, for a topic that grew, not the new partitions), and a leader named may
    still answer NOT_LEADER_OR_FOLLOWER for a moment. Each failed look-up asks again with a
    new client: librdkafka keeps the partition count of a topic it knows and answers "Unknown
    partition" for the new ones without asking the cluster again. :class:`KafkaLaunchError`
    after ``timeout_s`` (a hang detector)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    deadline = time.monotonic() + timeout_s
    consumer = Consumer({**conf, "group.id": "topic-ready"})
    try:
        for partition in range(partitions):
            while True:
                try:
                    consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
                    break
                except KafkaException as exc:
                    if time.monotonic() > deadline:
                        raise KafkaLaunchError(f"{topic}-{partition} not ready: {exc}") from exc
                    consumer.close()
                    time.sleep(0.05)
                    consumer = Consumer({**conf, "group.id": "topic-ready"})
    finally:
        consumer.close()


def _api_versions_ok(sock: socket.socket) -> bool:
    """One ApiVersions v0 round trip on ``sock``: answered without error?"""
    client_id = b"launcher"
    body = struct.pack(">hhih", API_VERSIONS_KEY, 0, 1, len(client_id)) + client_id
    sock.sendall(struct.pack(">i", len(body)) + body)
    head = b""
    while len(head) < 10:  # size, correlation id, error code
        chunk = sock.recv(10 - len(head))
        if not chunk:
            return False
        head += chunk
    _, correlation, error = struct.unpack(">iih", head)
    return bool(correlation == 1 and error == 0)


def _pkcs8(pem: Path, workdir: Path) -> Path:
    """``pem`` (a private key and its certificate chain) with the key as PKCS#8, the only
    unencrypted form Kafka's PEM key stores read."""
    from cryptography.hazmat.primitives import serialization

    out = workdir / f"pkcs8-{pem.name}"
    if out.exists():
        return out
    text = pem.read_bytes()
    key = serialization.load_pem_private_key(text, password=None)
    certs = [
        b"-----BEGIN CERTIFICATE-----" + c for c in text.split(b"-----BEGIN CERTIFICATE-----")[1:]
    ]
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    out.write_bytes(pkcs8 + b"".join(certs))
    return out
