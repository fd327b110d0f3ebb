"""Secrets never leak: SASL and TLS passwords appear nowhere the connector writes (issue 10).

The cluster's one listener is SASL_SSL with SCRAM-SHA-512 and required client certificates;
the client's private key is encrypted. Every secret the options carry holds :data:`MARKER`:
the SASL password (in ``kafka.sasl.jaas.config``), ``kafka.ssl.key.password`` (which really
decrypts the key), ``kafka.ssl.keystore.password`` and ``kafka.ssl.truststore.password``
(carried: the first is shadowed by the key password, the second has no use with PEM).
The marker is then looked for, and must be absent, in

* a Spark of its own (:mod:`tests.jobs.secrets_job`) running a reader → writer streaming
  pipeline to completion and a reader and a writer query with a wrong password to their
  failure: the errors, ``lastProgress`` / ``recentProgress`` / ``status`` of the three
  queries, Spark's driver log (log4j2 at INFO, to a file), its event log (plans, job and
  SQL events, properties), the process's console, and the log of every Python process
  Spark starts (driver, planners, executors: ``pyspark_kafka_txn`` at DEBUG, installed by a
  ``sitecustomize`` on ``PYTHONPATH``);
* what the writer leaves in Kafka: every record of the output topic (read_uncommitted, so
  aborted ones too: keys, values, headers) and the metadata of every group under the
  ``transactionalIdPrefix`` (batch markers, decision record) as OffsetFetch returns it;
* in this process, through the code Spark runs: the reader's planning and reading, the
  writer's task and commit with the logs captured at DEBUG (this process also runs the
  embedded broker, whose log is captured too), the pickled commit message, the decision
  record, ``repr`` of the parsed options and the errors of wrong passwords.

Each place is also checked to hold what it should (rows, log lines, events), so an empty
file cannot pass for a clean one.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from cryptography.hazmat.primitives import serialization
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import BinaryType, StructField, StructType

from pyspark_kafka_txn.client.admin import fetch_offsets
from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import AuthenticationError, KafkaTxnError
from pyspark_kafka_txn.options import parse_writer_options
from pyspark_kafka_txn.reader.stream import KafkaStreamReader
from pyspark_kafka_txn.source import KafkaTxnDataSource
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.common import connect
from pyspark_kafka_txn.writer.decision import read_decision
from pyspark_kafka_txn.writer.ids import decision_group
from pyspark_kafka_txn.writer.sink import KafkaStreamWriter
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.clients import consume_messages
from tests.support.clusters import CheckedKafka
from tests.support.hang import LONG_HANG_S
from tests.support.tls import tls_files

pytestmark = pytest.mark.own_spark

ROOT = Path(__file__).resolve().parents[2]
#: In every secret; must never be seen.
MARKER = f"Zq-secret-{uuid.uuid4().hex[:12]}"
USER = "alice"
SASL_PASSWORD = f"{MARKER}-sasl"
ROWS = [f"row-{i}".encode() for i in range(12)]

#: Installed in every Python process of the child's Spark: its package logs at DEBUG to
#: the file named by KAFKA_TXN_TEST_LOG.
SITECUSTOMIZE = """\
import logging
import os

_path = os.environ.get("KAFKA_TXN_TEST_LOG")
if _path:
    _handler = logging.FileHandler(_path)
    _handler.setFormatter(
        logging.Formatter("%(process)d %(name)s %(levelname)s %(message)s")
    )
    _logger = logging.getLogger("pyspark_kafka_txn")
    _logger.setLevel(logging.DEBUG)
    _logger.addHandler(_handler)
"""


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """CA, broker certificate and key, client certificate and its encrypted key (PEM)."""
    root = tmp_path_factory.mktemp("tls")
    t = tls_files(root)
    client = t.authority.issue_cert("client")
    files = {"ca": t.ca, "cert": t.cert, "key": t.key}
    files |= {name: root / f"{name}-only.pem" for name in ("client", "client_key")}
    for i, blob in enumerate(client.cert_chain_pems):
        blob.write_to_path(str(files["client"]), append=i > 0)
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    files["client_key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(f"{MARKER}-key".encode()),
        )
    )
    return files


@pytest.fixture(scope="module")
def secured(tls: dict[str, Path]) -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(
        protocol="SASL_SSL",
        users={USER: SASL_PASSWORD},
        ssl_certfile=tls["cert"],
        ssl_keyfile=tls["key"],
        ssl_cafile=tls["ca"],
        ssl_client_auth=True,
    )
    with CheckedKafka(security=security, transaction_abort_interval_ms=200) as cluster:
        yield cluster


def _security(tls: dict[str, Path], password: str = SASL_PASSWORD) -> dict[str, str]:
    """The ``kafka.*`` options of the secured listener, every secret holding MARKER."""
    return {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{USER}" password="{password}";'
        ),
        "kafka.ssl.truststore.location": str(tls["ca"]),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.password": f"{MARKER}-truststore",
        "kafka.ssl.certificate.location": str(tls["client"]),
        "kafka.ssl.key.location": str(tls["client_key"]),
        "kafka.ssl.key.password": f"{MARKER}-key",
        "kafka.ssl.keystore.password": f"{MARKER}-keystore",
    }


def _librdkafka(secured: EmbeddedKafka, tls: dict[str, Path]) -> dict[str, str]:
    """An independent librdkafka client's settings for the secured listener."""
    return {
        "bootstrap.servers": secured.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": SASL_PASSWORD,
        "ssl.ca.location": str(tls["ca"]),
        "ssl.certificate.location": str(tls["client"]),
        "ssl.key.location": str(tls["client_key"]),
        "ssl.key.password": f"{MARKER}-key",
    }


def _topics(secured: EmbeddedKafka, tls: dict[str, Path]) -> tuple[str, str]:
    """A source topic holding :data:`ROWS` and an empty sink topic."""
    source, sink = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("src", "out"))
    secured.create_topic(source, 2)
    secured.create_topic(sink, 2)
    producer = Producer(_librdkafka(secured, tls))
    for i, value in enumerate(ROWS):
        producer.produce(source, value=value, key=b"k%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    return source, sink


def _clean(what: str, data: bytes | str | None) -> None:
    if data is None:
        return
    blob = data.encode() if isinstance(data, str) else data
    assert MARKER.encode() not in blob, f"a secret leaked into {what}"


def _group_metadata(
    secured: EmbeddedKafka, tls: dict[str, Path], prefix: str
) -> dict[str, list[str]]:
    """The committed-offset metadata of every group under ``prefix``, by group.

    Groups are listed by librdkafka; their offsets are fetched with a plain OffsetFetch of
    our protocol client, because confluent-kafka's ``list_consumer_group_offsets`` reads
    the metadata string past its end (stray bytes, sometimes not UTF-8).
    """
    admin = AdminClient(_librdkafka(secured, tls))  # kept alive until the result is in
    listed = admin.list_consumer_groups().result(30)
    assert not listed.errors, listed.errors
    groups = sorted(g.group_id for g in listed.valid if g.group_id.startswith(prefix))
    options = parse_writer_options(
        {"kafka.bootstrap.servers": secured.bootstrap_servers, **_security(tls)}
    )
    with connect(options) as cluster:
        return {
            group: [
                c.metadata or ""
                for c in fetch_offsets(cluster, group, None, require_stable=False).values()
            ]
            for group in groups
        }


def test_secrets_stay_out_of_spark_logs_progress_and_kafka(
    secured: EmbeddedKafka, tls: dict[str, Path], tmp_path: Path
) -> None:
    source, sink = _topics(secured, tls)
    prefix = f"sec-{uuid.uuid4().hex[:8]}-"
    out, site = tmp_path / "out", tmp_path / "site"
    out.mkdir()
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "bootstrap": secured.bootstrap_servers,
                "source": source,
                "sink": sink,
                "prefix": prefix,
                "security": _security(tls),
                "wrong_security": _security(tls, f"{MARKER}-wrong"),
            }
        )
    )
    python_log = tmp_path / "python.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "KAFKA_TXN_TEST_LOG": str(python_log),
    }
    console = tmp_path / "console.log"
    with console.open("wb") as sink_file:
        done = subprocess.run(
            [sys.executable, "-m", "tests.jobs.secrets_job", str(settings), str(out)],
            cwd=ROOT,
            env=env,
            stdout=sink_file,
            stderr=subprocess.STDOUT,
            timeout=LONG_HANG_S,  # a hang detector, inside pytest's timeout
            check=False,
        )
    assert done.returncode == 0, console.read_text()[-4000:]

    # What the queries did: the pipeline wrote every row, the others failed on the password.
    results = json.loads((out / "result.json").read_text())
    assert results["pipeline"]["error"] is None
    assert results["pipeline"]["recent"], "the pipeline made no progress"
    for name in ("reader_wrong_password", "writer_wrong_password"):
        assert "Authentication failed" in (results[name]["error"] or ""), results[name]
    _clean("the queries' errors, progress and status", json.dumps(results))

    # Every file the child left: console, driver log, event log, Python logs.
    files = [console, python_log, *(p for p in out.rglob("*") if p.is_file())]
    for path in files:
        _clean(str(path.relative_to(tmp_path)), path.read_bytes())
    python_lines = python_log.read_text()
    assert "Initial offsets" in python_lines  # the reader's planner
    assert "prepared batch 0" in python_lines  # an executor's write task
    assert len({line.split()[0] for line in python_lines.splitlines()}) >= 3  # processes
    assert "MicroBatchExecution" in (out / "driver.log").read_text()
    events = [p for p in (out / "events").rglob("*") if p.is_file()]
    assert any(b"SparkListenerSQLExecutionStart" in p.read_bytes() for p in events)

    # What the writer left in Kafka: records (aborted ones too) and group metadata.
    conf = _librdkafka(secured, tls)
    conf.pop("bootstrap.servers")
    committed = consume_messages(secured.bootstrap_servers, sink, 2, **conf)
    assert sorted(m.value() for m in committed) == sorted(ROWS)
    everything = consume_messages(
        secured.bootstrap_servers, sink, 2, isolation="read_uncommitted", **conf
    )
    for message in everything:
        _clean("an output record", message.key())
        _clean("an output record", message.value())
        headers = cast("list[tuple[str, bytes | None]]", message.headers() or [])
        for key, value in headers:
            _clean("an output header", key)
            _clean("an output header", value)
    groups = _group_metadata(secured, tls, prefix)
    query = results["pipeline"]["id"]
    assert decision_group(prefix, query) in groups  # the decision record's header
    assert any(m for metadata in groups.values() for m in metadata)  # markers, decision
    _clean("group metadata", json.dumps(groups))


def test_secrets_stay_out_of_logs_messages_and_errors_in_process(
    secured: EmbeddedKafka, tls: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """The planner's, the task's and the commit's code with the logs at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn")
    source, sink = _topics(secured, tls)
    bs = secured.bootstrap_servers
    security = _security(tls)

    # Reader: planning on the driver, reading on an executor.
    options = {"kafka.bootstrap.servers": bs, "subscribe": source, **security}
    data = KafkaTxnDataSource({**options, "startingOffsets": "earliest"})
    reader = data.streamReader(data.schema())
    assert isinstance(reader, KafkaStreamReader)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    read = [r for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()]
    reader.stop()
    assert sorted(bytes(r["value"]) for r in read) == sorted(ROWS)
    _clean("the reader's repr", repr(reader.options))

    # Writer: the task prepares, its pickled commit message goes to the driver, which
    # records the decision and commits.
    prefix = f"sec-{uuid.uuid4().hex[:8]}-"
    given = {"kafka.bootstrap.servers": bs, "topic": sink, "transactionalIdPrefix": prefix}
    writer = KafkaTxnDataSource({**given, **security}).streamWriter(
        StructType([StructField("value", BinaryType())]), False
    )
    assert isinstance(writer, KafkaStreamWriter)
    _clean("the writer's repr", repr(writer.options))
    query = str(uuid.uuid4())
    batch = pa.RecordBatch.from_pydict({"value": pa.array(ROWS, pa.binary())})
    message = write_task(writer.options, TaskIdentity(query, 0, 0, 0), iter([batch]), 60_000)
    _clean("the pickled commit message", pickle.dumps(message))
    commit_batch(writer.options, [pickle.loads(pickle.dumps(message))], 0)
    with connect(writer.options) as cluster:
        decision = read_decision(cluster, prefix, query, batch=0)
    assert decision is not None and decision.handles
    _clean("the decision record", repr(decision))
    groups = _group_metadata(secured, tls, prefix)
    assert decision_group(prefix, query) in groups
    _clean("group metadata", json.dumps(groups))

    # Wrong passwords: the errors say what failed, never the password given.
    wrong = {**security, **_security(tls, f"{MARKER}-wrong")}
    data = KafkaTxnDataSource({**options, **wrong})
    with pytest.raises(AuthenticationError) as reader_error:
        data.streamReader(data.schema()).initialOffset()
    with pytest.raises(KafkaTxnError) as writer_error:
        KafkaTxnDataSource({**given, **wrong}).streamWriter(
            StructType([StructField("value", BinaryType())]), False
        )
    for error in (reader_error.value, writer_error.value):
        assert "Authentication failed" in str(error)
        _clean("an error", str(error))

    messages = [r.getMessage() for r in caplog.records]
    assert any("prepared batch 0" in m for m in messages)
    assert any("committed" in m for m in messages)
    assert any(r.levelno == logging.DEBUG for r in caplog.records)
    _clean("the captured logs", "\n".join(messages) + caplog.text)
