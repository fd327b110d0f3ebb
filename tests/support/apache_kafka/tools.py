"""Apache Kafka's command-line tools (``kafka-transactions``, ``kafka-acls``, ...) run from a
release's jars against any cluster: the Apache Kafka of :mod:`.cluster`, the embedded
cluster, or an external one.

The tools are Java clients of the protocol, so the same command can be put to every target
and its answers compared. :func:`kafka_tool` is the one place that builds a tool's command
line; :meth:`~tests.support.apache_kafka.cluster.ApacheKafka.tool` adds the cluster's
bootstrap servers and its client properties (``--command-config``). A PLAINTEXT cluster needs
no properties. The tools log at WARN to nowhere (a log4j2 configuration without appenders),
so their stdout holds only their answer and their stderr only their error messages.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.support.apache_kafka.jars import classpath, default_version, has_class, kafka_lib

#: How long one tool run may take (a JVM start and a few requests) before it is killed: a
#: hang detector for a loaded 2-core machine, never a timing assertion.
TOOL_TIMEOUT_S = 120.0

#: Kafka's command-line tools: script name -> main classes by release (newest first).
TOOLS: dict[str, tuple[str, ...]] = {
    "kafka-acls": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
    "kafka-transactions": ("org.apache.kafka.tools.TransactionsCommand",),
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "kafka-configs": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-consumer-groups": (
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "kafka.admin.ConsumerGroupCommand",
    ),
    "kafka-reassign-partitions": (
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        "kafka.admin.ReassignPartitionsCommand",
    ),
    "kafka-leader-election": (
        "org.apache.kafka.tools.LeaderElectionCommand",
        "kafka.admin.LeaderElectionCommand",
    ),
    "kafka-metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-features": ("org.apache.kafka.tools.FeatureCommand",),
    "kafka-console-consumer": (
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "kafka.tools.ConsoleConsumer",
    ),
    "kafka-storage": ("kafka.tools.StorageTool",),
}

_TOOL_LOG4J = "status = warn\nrootLogger.level = WARN\n"


class ToolNotFoundError(LookupError):
    """The Kafka release has no such tool (unknown script name, or a release without
    its main class)."""


def tool_main(script: str, version: str | None = None) -> str:
    """The main class of ``script`` in Kafka ``version``'s jars.

    Parameters
    ----------
    script
        A key of :data:`TOOLS` (``kafka-transactions``, ...).
    version
        The Kafka release (default: :func:`~tests.support.apache_kafka.jars.default_version`).

    Returns
    -------
    str
        The first of the script's main classes the release has.

    Raises
    ------
    ToolNotFoundError
        If the script is unknown or the release has none of its classes.
    """
    version = version or default_version()
    main = next((c for c in TOOLS.get(script, ()) if has_class(version, c)), None)
    if main is None:
        raise ToolNotFoundError(f"Kafka {version} has no {script} tool")
    return main


def tool_log4j(version: str | None = None) -> Path:
    """A log4j2 configuration that drops the tools' logs (WARN, no appender), written
    once next to the release's cached jars (atomically: sessions may race for it)."""
    path = kafka_lib(version).parent / "tools-log4j2.properties"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tools-log4j2-")
        with os.fdopen(fd, "w") as fh:
            fh.write(_TOOL_LOG4J)
        os.replace(tmp, path)
    return path


def run_java(
    main: str,
    *args: str,
    version: str | None = None,
    log4j: Path | None = None,
    **kw: Any,
) -> subprocess.CompletedProcess[str]:
    """Run a class of Kafka ``version``'s jars to completion, its output captured as text.

    Parameters
    ----------
    main
        The main class.
    *args
        Its arguments.
    version
        The Kafka release (default: the tests' release).
    log4j
        The log4j2 configuration (default: :func:`tool_log4j`).
    **kw
        Passed to :func:`subprocess.run` (``timeout`` defaults to :data:`TOOL_TIMEOUT_S`).

    Returns
    -------
    subprocess.CompletedProcess[str]
        Whatever the exit code (``check=False``).
    """
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath(version)]
    cmd += [f"-Dlog4j2.configurationFile={log4j or tool_log4j(version)}", main, *args]
    kw.setdefault("timeout", TOOL_TIMEOUT_S)
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def kafka_tool(
    script: str,
    bootstrap_servers: str,
    *args: str,
    version: str | None = None,
    command_config: Path | None = None,
    log4j: Path | None = None,
    timeout_s: float = TOOL_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run Kafka's command-line tool ``script`` against the cluster at ``bootstrap_servers``.

    Parameters
    ----------
    script
        A key of :data:`TOOLS`, e.g. ``kafka-transactions``.
    bootstrap_servers
        ``host:port[,...]`` of any Kafka-compatible cluster.
    *args
        The tool's command and options (after ``--bootstrap-server``), e.g.
        ``"describe", "--transactional-id", "x"``.
    version
        The Kafka release whose tool runs (default: the tests' release).
    command_config
        A Java client properties file (``--command-config``; ``--consumer.config`` for
        ``kafka-console-consumer``); none for a PLAINTEXT cluster.
    log4j
        The log4j2 configuration (default: :func:`tool_log4j`).
    timeout_s
        Hang detector: the JVM is killed after this long
        (:class:`subprocess.TimeoutExpired`).

    Returns
    -------
    subprocess.CompletedProcess[str]
        The tool's exit code, stdout and stderr.

    Raises
    ------
    ToolNotFoundError
        If the release has no such tool.
    """
    main = tool_main(script, version)
    conf: list[str] = []
    if command_config is not None:
        flag = "--consumer.config" if script == "kafka-console-consumer" else "--command-config"
        conf = [flag, str(command_config)]
    return run_java(
        main,
        "--bootstrap-server",
        bootstrap_servers,
        *conf,
        *args,
        version=version,
        log4j=log4j,
        timeout=timeout_s,
    )
