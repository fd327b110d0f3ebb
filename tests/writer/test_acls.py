"""The connector under least-privilege ACLs (issue 12): exactly the documented ACLs suffice,
and without any one of them a query fails at its first batch naming what is missing.

One SASL/PLAIN cluster with an authorizer serves the module: ``User:admin`` is a super
user (creates topics, writes the input, manages ACLs, reads the output), ``User:app`` runs
the queries and gets exactly the ACLs ``docs/writer.md`` lists ("Least-privilege ACLs"):

* Read on the input topic (the reader; no group ACL: its consumers never use their group);
* Write on the PREFIXED TransactionalId ``transactionalIdPrefix`` (transactions; Describe
  for coordinator look-ups and DescribeTransactions is implied);
* Write on the output topic (produce) and Read on it (the batch markers and the decision
  record are offset commits of an output-topic partition);
* Read on the PREFIXED Group ``transactionalIdPrefix`` (marker and decision groups);
* DescribeConfigs on the cluster, optional (``transaction.max.timeout.ms``).

A Kafka → ``kafka_txn`` → ``kafka_txn`` pipeline with all of them writes its input exactly
once (read back by the super user with a read_committed consumer). Without any one of
the required ones, the query fails in its first micro-batch with an
:class:`~pyspark_kafka_txn.errors.AuthorizationError` naming the operation, the resource
and an ACL that allows it (never the password), and nothing becomes visible in the output
topic nor stays open under the prefix. Without DescribeConfigs the writer warns, naming the
refused operation, and falls back to a 60 s transaction timeout (checked in this process,
with the same write and commit code Spark runs). Also in this process: the reader's
executor path (Read refused at Fetch, Describe granted), and a driver commit refused
because the TransactionalId ACL was taken away after the tasks ran (named; the recorded
decision stands and commits once the ACL is back).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.errors import AuthorizationError
from pyspark_kafka_txn.options import parse_reader_options, parse_writer_options
from pyspark_kafka_txn.reader.common import KafkaInputPartition
from pyspark_kafka_txn.reader.executor import read_range
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.sink import resolve_timeout
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.acls import (
    INPUT,
    allow,
    committed_values,
    input_values,
    principal_filter,
    replace_acls,
    secured_fixture,
)
from tests.support.clients import sasl_conf
from tests.support.lso import pinned_partitions
from tests.support.txns import committed_batches, open_transactions
from tests.support.writer_kit import HANG_S, pipeline

# In the Spark legs (tests/README.md), though not every test uses the session: its tests without a
# session drive the reader's and writer's tasks as Spark does.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.local_spark_only(
        "the brokers' authorization of the same clients, whichever way Spark runs them"
    ),
]

APP = "app"
#: The app's password: must appear in no error.
APP_PASSWORD = f"pw-{uuid.uuid4().hex[:12]}"
USERS = {"admin": "admin-pw", APP: APP_PASSWORD}

# The documented ACLs, by what they are for (the keys name them in test ids).
INPUT_READ = "Read on the input topic"
TXN_WRITE = "Write on the PREFIXED TransactionalId"
OUTPUT_WRITE = "Write on the output topic"
OUTPUT_READ = "Read on the output topic"
GROUP_READ = "Read on the PREFIXED Group"
DESCRIBE_CONFIGS = "DescribeConfigs on the cluster (optional)"
REQUIRED = (INPUT_READ, TXN_WRITE, OUTPUT_WRITE, OUTPUT_READ, GROUP_READ)


secured = secured_fixture(USERS)


def _conf(kafka: EmbeddedKafka, user: str) -> dict[str, Any]:
    return dict(sasl_conf(kafka.bootstrap_servers, "PLAIN", user, USERS[user]))


def _app_options() -> dict[str, str]:
    """The ``kafka.*`` options of ``User:app`` (Spark's option names)."""
    return {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": APP,
        "kafka.sasl.password": APP_PASSWORD,
    }


@pytest.fixture(scope="module")
def source(secured: EmbeddedKafka) -> str:
    """A 2-partition topic holding :data:`~tests.support.acls.INPUT` (written by the super
    user)."""
    topic = f"acl-src-{uuid.uuid4().hex[:8]}"
    secured.create_topic(topic, 2)
    committed_batches(secured.bootstrap_servers, topic, INPUT, **_conf(secured, "admin"))
    return topic


@pytest.fixture(scope="module")
def failing_sink(secured: EmbeddedKafka) -> str:
    """The output topic of every run that must fail: read_committed, it stays empty."""
    topic = f"acl-fail-{uuid.uuid4().hex[:8]}"
    secured.create_topic(topic, 2)
    return topic


def _prefix() -> str:
    return f"acl-{uuid.uuid4().hex[:8]}-"


def _documented(source: str, sink: str, prefix: str) -> dict[str, AclBinding]:
    """The ACLs of ``User:app`` that docs/writer.md lists, for this input, output, prefix."""

    def acl(
        rtype: ResourceType, name: str, op: AclOperation, pattern: ResourcePatternType
    ) -> AclBinding:
        return allow(rtype, name, op, f"User:{APP}", pattern)

    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    return {
        INPUT_READ: acl(ResourceType.TOPIC, source, AclOperation.READ, literal),
        TXN_WRITE: acl(ResourceType.TRANSACTIONAL_ID, prefix, AclOperation.WRITE, prefixed),
        OUTPUT_WRITE: acl(ResourceType.TOPIC, sink, AclOperation.WRITE, literal),
        OUTPUT_READ: acl(ResourceType.TOPIC, sink, AclOperation.READ, literal),
        GROUP_READ: acl(ResourceType.GROUP, prefix, AclOperation.READ, prefixed),
        # librdkafka names the cluster resource BROKER; Kafka wants the name kafka-cluster.
        DESCRIBE_CONFIGS: acl(
            ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS, literal
        ),
    }


def _grant(kafka: EmbeddedKafka, acls: list[AclBinding]) -> None:
    """Make ``acls`` the only ACLs of ``User:app`` (checked with DescribeAcls)."""
    admin = AdminClient(_conf(kafka, "admin"))  # referenced until its futures complete
    replace_acls(admin, f"User:{APP}", acls)
    now = admin.describe_acls(principal_filter(f"User:{APP}"), request_timeout=30).result(30)
    assert sorted(map(str, now)) == sorted(map(str, acls))


def _committed(kafka: EmbeddedKafka, topic: str) -> Counter[bytes]:
    """Every value a read_committed consumer of the super user sees in ``topic``."""
    return committed_values(kafka.bootstrap_servers, topic, **_conf(kafka, "admin"))


def _pinned(kafka: EmbeddedKafka, topic: str) -> list[int]:
    """Partitions of the 2-partition ``topic`` whose LSO an open transaction holds below
    the high watermark, as librdkafka sees them (an independent check of "nothing open")."""
    return sorted(pinned_partitions(kafka.bootstrap_servers, topic, 2, **_conf(kafka, "admin")))


def _open_under(kafka: EmbeddedKafka, prefix: str) -> list[str]:
    """Transactional ids under ``prefix`` with an open transaction (as the super user)."""
    return list(open_transactions(kafka.bootstrap_servers, prefix, _conf(kafka, "admin")))


def test_pipeline_is_exactly_once_with_exactly_the_documented_acls(
    spark: SparkSession, secured: EmbeddedKafka, source: str, tmp_path: Path
) -> None:
    sink = f"acl-out-{uuid.uuid4().hex[:8]}"
    secured.create_topic(sink, 2)
    prefix = _prefix()
    _grant(secured, list(_documented(source, sink, prefix).values()))
    app = _app_options()
    start = pipeline(
        spark, secured.bootstrap_servers, source, sink, prefix, tmp_path / "cp",
        maxOffsetsPerTrigger="12", **app,
    )  # fmt: skip
    query = start(app)
    assert query.awaitTermination(HANG_S), "the query did not end"
    assert query.exception() is None, query.exception()
    assert len(query.recentProgress) >= 2  # several micro-batches, each committed
    assert _committed(secured, sink) == input_values()  # every record exactly once
    assert _open_under(secured, prefix) == []
    assert _pinned(secured, sink) == []


def _expected_error(which: str, source: str, sink: str, prefix: str) -> list[str]:
    """What the error of a run without ``which`` must say (operation, resource, ACL)."""
    return {
        INPUT_READ: [f"DESCRIBE on Topic '{source}'", f"--operation Read --topic {source}"],
        TXN_WRITE: [
            f"on TransactionalId '{prefix}",
            f"--operation Write --transactional-id {prefix} --resource-pattern-type prefixed",
        ],
        OUTPUT_WRITE: [f"WRITE on Topic '{sink}'", f"--operation Write --topic {sink}"],
        OUTPUT_READ: [f"READ on Topic '{sink}'", f"--operation Read --topic {sink}"],
        GROUP_READ: [
            f"on Group '{prefix}",
            f"--operation Read --group {prefix} --resource-pattern-type prefixed",
        ],
    }[which]


@pytest.mark.parametrize("missing", REQUIRED)
def test_without_one_required_acl_the_first_batch_fails_naming_it(
    spark: SparkSession,
    secured: EmbeddedKafka,
    source: str,
    failing_sink: str,
    tmp_path: Path,
    missing: str,
) -> None:
    prefix = _prefix()
    acls = _documented(source, failing_sink, prefix)
    del acls[missing]
    _grant(secured, list(acls.values()))
    app = _app_options()
    start = pipeline(
        spark, secured.bootstrap_servers, source, failing_sink, prefix, tmp_path / "cp", **app
    )
    query = start(app)
    with pytest.raises(StreamingQueryException, match="not authorized") as failure:
        query.awaitTermination(HANG_S)
    text = str(failure.value)
    for part in _expected_error(missing, source, failing_sink, prefix):
        assert part in text, f"{part!r} not in the error: {text}"
    assert f"--allow-principal User:{APP}" in text
    assert APP_PASSWORD not in text
    assert query.lastProgress is None  # it failed in its first micro-batch
    assert _committed(secured, failing_sink) == Counter()  # nothing visible
    assert _open_under(secured, prefix) == []  # and nothing left pinning the LSO
    assert _pinned(secured, failing_sink) == []  # (librdkafka: "nothing visible" is real)


def test_describe_configs_is_optional_the_timeout_falls_back_to_60s(
    secured: EmbeddedKafka, source: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Without DescribeConfigs the start check warns naming the refused operation, the
    default transaction timeout becomes 60 s, and the write and commit Spark runs (here
    called in this process) write exactly once."""
    sink = f"acl-opt-{uuid.uuid4().hex[:8]}"
    secured.create_topic(sink, 2)
    prefix = _prefix()
    acls = _documented(source, sink, prefix)
    del acls[DESCRIBE_CONFIGS]
    _grant(secured, list(acls.values()))
    options = parse_writer_options(
        {
            "kafka.bootstrap.servers": secured.bootstrap_servers,
            "topic": sink,
            "transactionalIdPrefix": prefix,
            **_app_options(),
        }
    )
    with caplog.at_level(logging.WARNING, logger="pyspark_kafka_txn.writer.sink"):
        timeout_ms = resolve_timeout(options)
    assert timeout_ms == 60_000
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "DESCRIBE_CONFIGS on Cluster 'kafka-cluster'" in warning
    assert "--operation DescribeConfigs --cluster" in warning
    assert APP_PASSWORD not in warning
    rows = [f"opt-{i}".encode() for i in range(8)]
    query_id = str(uuid.uuid4())
    messages = [
        write_task(
            options,
            TaskIdentity(query_id, 0, part, 0),
            iter([pa.RecordBatch.from_pydict({"value": pa.array(rows[part::2], pa.binary())})]),
            timeout_ms,
        )
        for part in range(2)
    ]
    commit_batch(options, messages, 0)
    assert _committed(secured, sink) == Counter(rows)
    assert _open_under(secured, prefix) == []
    assert _pinned(secured, sink) == []


def test_reader_task_without_read_fails_naming_it(secured: EmbeddedKafka, source: str) -> None:
    """Describe but not Read on the input: planning works, the executor's Fetch is refused
    and the task fails at once naming READ on the topic (librdkafka reports it as a
    non-retriable consumer error)."""
    describe = allow(ResourceType.TOPIC, source, AclOperation.DESCRIBE, f"User:{APP}")
    _grant(secured, [describe])
    options = parse_reader_options(
        {"kafka.bootstrap.servers": secured.bootstrap_servers, "subscribe": source}
        | _app_options(),
        streaming=False,
    )
    with pytest.raises(AuthorizationError) as failure:
        list(read_range(options, KafkaInputPartition(source, 0, 0, 5), group_id="acl-reader"))
    error = failure.value
    assert (error.operation, error.resource_type, error.resource_name) == ("READ", "Topic", source)
    assert f"--allow-principal User:{APP} --operation Read --topic {source}" in str(error)
    assert APP_PASSWORD not in str(error)


def test_commit_refused_by_a_revoked_acl_names_it_and_the_decision_stands(
    secured: EmbeddedKafka, source: str
) -> None:
    """The TransactionalId ACL taken away between the tasks and the driver's commit: the
    commit fails naming it (not as a fenced or timed-out transaction), nothing is visible,
    and once the ACL is back the same commit (as on restart) makes the batch visible
    exactly once."""
    sink = f"acl-rev-{uuid.uuid4().hex[:8]}"
    secured.create_topic(sink, 2)
    prefix = _prefix()
    acls = _documented(source, sink, prefix)
    _grant(secured, list(acls.values()))
    options = parse_writer_options(
        {
            "kafka.bootstrap.servers": secured.bootstrap_servers,
            "topic": sink,
            "transactionalIdPrefix": prefix,
            **_app_options(),
        }
    )
    rows = [f"rev-{i}".encode() for i in range(6)]
    query_id = str(uuid.uuid4())
    batch = pa.RecordBatch.from_pydict({"value": pa.array(rows, pa.binary())})
    message = write_task(options, TaskIdentity(query_id, 0, 0, 0), iter([batch]), 60_000)
    _grant(secured, [a for k, a in acls.items() if k != TXN_WRITE])
    with pytest.raises(AuthorizationError) as failure:
        commit_batch(options, [message], 0)
    error = failure.value
    assert error.resource_type == "TransactionalId"
    assert error.resource_name == f"{prefix}{query_id}-0"
    assert f"--operation Write --transactional-id {prefix} --resource-pattern-type prefixed" in (
        str(error)
    )
    # Neither committed nor aborted: still open, as librdkafka sees the LSO.
    assert _pinned(secured, sink) != []
    assert _committed(secured, sink) == Counter()
    _grant(secured, list(acls.values()))
    commit_batch(options, [message], 0)
    assert _committed(secured, sink) == Counter(rows)
    assert _open_under(secured, prefix) == []
    assert _pinned(secured, sink) == []
