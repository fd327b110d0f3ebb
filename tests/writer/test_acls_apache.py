"""Security on Apache Kafka itself (issue 23, item 6): the documented least-privilege ACLs,
created with Kafka's own ``kafka-acls`` tool from the docs' commands, suffice on a
SASL_PLAINTEXT/SCRAM cluster with ``StandardAuthorizer``; without any one of them a query
fails naming it; and TLS with client certificates works, the certificate's principal
holding the same ACLs.

The ACLs are not restated here: the ``bin/kafka-acls.sh $B …`` lines are read from
``docs/writer.md`` ("Least-privilege ACLs") and ``docs/reader.md`` ("ACLs": the line of a
``subscribe`` topic, ``events`` there) and run as written through Kafka's tool as the super
user, with ``$P``, ``$PREFIX`` and ``$OUT`` (each output topic, as the docs say) and the
reader's topic replaced (``$B`` is the tool's own ``--bootstrap-server`` and
``--command-config``). ``kafka-acls --list`` shows exactly the ACLs those lines add.

* With all of them, a Kafka → ``kafka_txn`` → ``kafka_txn`` streaming pipeline run as
  ``User:app`` (SCRAM-SHA-512, given as Spark's ``kafka.sasl.jaas.config``) writes every
  input record exactly once, read back by the super user with an independent
  read_committed consumer, and leaves no transaction open (LSO = high watermark on every
  output partition, none open under the prefix). The reader's consumers have no group ACL
  (their group ids start with ``spark-kafka-source``), as the reader's docs say.
* Without one required line (removed with ``kafka-acls --remove --force``, and
  ``kafka-acls --list`` showing it gone), the query fails in its first micro-batch with an
  :class:`~pyspark_kafka_txn.errors.AuthorizationError` naming the refused operation, the
  resource, and as the ACL to add the docs' line itself; no password in it, nothing
  visible in the output topic, nothing open.
* A cluster whose only listener is SSL with client certificates required, the
  authorizer on and ``ssl.principal.mapping.rules`` mapping a certificate's CN to the
  principal (``User:app`` for ``CN=app``), gets the writer's documented lines for
  ``User:app``; a batch write and a batch read through ``kafka_txn`` with Spark's PEM key
  and trust store options (``kafka.ssl.keystore.*`` and ``kafka.ssl.truststore.*``) are
  exactly once, read back independently.

Each cluster is Apache Kafka started by this module (not the session's ``kafka``
fixture), so the module runs the same in every ``KAFKA_TXN_TARGET`` leg that selects it;
it is marked ``local_spark_only``: how Spark runs does not change what it checks, and its
clusters and ACL tool runs cost about two minutes per run.
"""

from __future__ import annotations

import re
import shlex
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from tests.support.acls import INPUT, committed_values, input_values
from tests.support.apache_kafka import ApacheKafka, Security, cert_principal
from tests.support.lso import assert_nothing_open
from tests.support.tls import tls_files
from tests.support.txns import committed_batches, open_transactions
from tests.support.writer_kit import HANG_S, completes, pipeline

pytestmark = pytest.mark.local_spark_only(
    "starts its own Apache Kafka clusters; what it checks does not depend on how Spark runs"
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
APP = "app"
PRINCIPAL = f"User:{APP}"
#: Neither password may appear in any error.
APP_PASSWORD = f"app-{uuid.uuid4().hex[:12]}"
ADMIN_PASSWORD = f"admin-{uuid.uuid4().hex[:12]}"
#: The super user first: it is also the brokers' own user.
USERS = {"admin": ADMIN_PASSWORD, APP: APP_PASSWORD}
#: The topic the reader's documented line names.
READER_DOC_TOPIC = "events"
PARTITIONS = 2


# -- the docs' commands --------------------------------------------------------------------


@dataclass(frozen=True)
class DocCommand:
    """One ``bin/kafka-acls.sh $B …`` line of a page of the docs, as written there."""

    page: str
    line: str

    @property
    def args(self) -> list[str]:
        """The tool's arguments after ``$B``, variables not replaced."""
        words = shlex.split(self.line, comments=True)
        assert words[:2] == ["bin/kafka-acls.sh", "$B"], f"{self.page}: {self.line}"
        return words[2:]

    @property
    def optional(self) -> bool:
        """Marked ``# optional`` in the docs."""
        return "# optional" in self.line

    def value(self, flag: str) -> str | None:
        """The word after ``flag`` (``--topic``), if the line has it."""
        args = self.args
        return args[args.index(flag) + 1] if flag in args else None

    @property
    def label(self) -> str:
        """``page:Operation-resource-name``, e.g. ``writer:Read-topic-$OUT`` (test ids)."""
        resource = next(a for a in self.args if a.startswith("--") and a in _RESOURCES)
        name = self.value(resource) if resource != "--cluster" else ""
        return f"{self.page}:{self.value('--operation')}-{resource[2:]}-{name}".rstrip("-")

    def substituted(self, values: Mapping[str, str]) -> list[str]:
        """:attr:`args` with each word that is a key of ``values`` replaced (``$OUT``, or the
        reader's example topic); any other ``$`` variable fails."""
        out = [values.get(word, word) for word in self.args]
        unknown = [w for w in out if "$" in w]
        assert not unknown, f"{self.page}.md uses {unknown}, unknown to this test: {self.line}"
        return out


#: kafka-acls resource options -> (resource type in its listing, in our errors).
_RESOURCES = {
    "--topic": ("TOPIC", "Topic"),
    "--group": ("GROUP", "Group"),
    "--transactional-id": ("TRANSACTIONAL_ID", "TransactionalId"),
    "--cluster": ("CLUSTER", "Cluster"),
}


def _doc_commands(page: str, heading: str) -> list[DocCommand]:
    """The ``bin/kafka-acls.sh`` lines of the first ``sh`` block under ``heading``."""
    text = (DOCS / f"{page}.md").read_text()
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, f"no sh block under {heading!r} in docs/{page}.md"
    lines = [ln for ln in block.group(1).splitlines() if ln.startswith("bin/kafka-acls.sh ")]
    assert lines, f"no bin/kafka-acls.sh line under {heading!r} in docs/{page}.md"
    return [DocCommand(page, ln) for ln in lines]


def _documented() -> list[DocCommand]:
    """The reader's line for a ``subscribe`` topic, then every line of the writer's list."""
    reader = [
        c for c in _doc_commands("reader", "## ACLs") if c.value("--topic") == READER_DOC_TOPIC
    ]
    assert len(reader) == 1, reader
    return reader + _doc_commands("writer", "## Least-privilege ACLs")


DOCUMENTED = _documented()
REQUIRED = [c for c in DOCUMENTED if not c.optional]


@dataclass(frozen=True)
class Granted:
    """A cluster where ``User:app`` holds the documented ACLs, and what they name."""

    kafka: ApacheKafka
    source: str
    outputs: tuple[str, ...]
    prefix: str

    def runs(self, command: DocCommand) -> list[list[str]]:
        """The tool arguments ``command`` stands for here: one per output topic for a line
        naming ``$OUT`` (the docs: "repeat the two topic lines for each one")."""
        values = {"$P": PRINCIPAL, "$PREFIX": self.prefix, READER_DOC_TOPIC: self.source}
        outputs = self.outputs if "$OUT" in command.args else ("",)
        return [command.substituted(values | {"$OUT": out}) for out in outputs]

    def all_acls(self) -> set[tuple[str, ...]]:
        """What ``kafka-acls --list`` must show for ``User:app``."""
        return {_acl_of(args) for c in DOCUMENTED for args in self.runs(c)}


def _acls_tool(kafka: ApacheKafka, *args: str) -> str:
    """Run Kafka's ``kafka-acls`` as the super user; its output (it must succeed)."""
    done = kafka.tool("kafka-acls", *args, user="admin")
    assert done.returncode == 0, f"kafka-acls {shlex.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def _acl_of(args: list[str]) -> tuple[str, ...]:
    """The ACL an ``--add`` command creates, as ``kafka-acls --list`` shows it: resource
    type, name, pattern type, principal, operation, permission."""
    flag = next(a for a in args if a in _RESOURCES)
    name = "kafka-cluster" if flag == "--cluster" else args[args.index(flag) + 1]
    pattern = "LITERAL"
    if "--resource-pattern-type" in args:
        pattern = args[args.index("--resource-pattern-type") + 1].upper()
    operation = re.sub(r"(?<!^)(?=[A-Z])", "_", args[args.index("--operation") + 1]).upper()
    principal = args[args.index("--allow-principal") + 1]
    return (_RESOURCES[flag][0], name, pattern, principal, operation, "ALLOW")


def _listed(kafka: ApacheKafka) -> set[tuple[str, ...]]:
    """The ACLs of ``User:app`` as ``kafka-acls --list --principal User:app`` prints them."""
    text = _acls_tool(kafka, "--list", "--principal", PRINCIPAL)
    resource = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)")
    entry = re.compile(r"\(principal=(.*), host=\*, operation=(\w+), permissionType=(\w+)\)")
    acls: set[tuple[str, ...]] = set()
    current: tuple[str, ...] = ()
    for line in text.splitlines():
        if (found := resource.search(line)) is not None:
            current = found.groups()
        elif (found := entry.search(line)) is not None:
            assert current, text
            acls.add(current + found.groups())
    return acls


def _grant(kafka: ApacheKafka, source: str, outputs: tuple[str, ...], prefix: str) -> Granted:
    """Run every documented line for ``User:app``; check the listing shows exactly them."""
    granted = Granted(kafka, source, outputs, prefix)
    assert _listed(kafka) == set(), "User:app had ACLs before the docs' lines ran"
    for command in DOCUMENTED:
        for args in granted.runs(command):
            _acls_tool(kafka, *args)
    assert _listed(kafka) == granted.all_acls()
    return granted


# -- the SASL/SCRAM cluster ----------------------------------------------------------------


@pytest.fixture(scope="module")
def scram(request: pytest.FixtureRequest) -> Iterator[ApacheKafka]:
    """One node, SASL_PLAINTEXT with SCRAM-SHA-512/256, StandardAuthorizer; ``User:admin``
    is a super user (its broker logs are kept if a test of the module failed)."""
    security = Security(
        protocol="SASL_PLAINTEXT",
        users=USERS,
        mechanisms=("SCRAM-SHA-512", "SCRAM-SHA-256"),
        authorizer=True,
        super_users=("User:admin",),
    )
    failed = request.session.testsfailed
    with ApacheKafka(security=security) as kafka:
        yield kafka
        kafka.keep_logs = request.session.testsfailed > failed


def _admin(kafka: ApacheKafka) -> dict[str, Any]:
    """librdkafka settings of the super user (the independent checks)."""
    return {**kafka.client_config("admin"), "log_level": 0}


def _app_options() -> dict[str, str]:
    """``User:app``'s ``kafka.*`` options, as given to Spark's built-in connector."""
    return {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{APP}" password="{APP_PASSWORD}";'
        ),
    }


@pytest.fixture(scope="module")
def granted(scram: ApacheKafka) -> Granted:
    """The input (:data:`~tests.support.acls.INPUT`, written by the super user), an output
    topic for the pipeline and one for the runs that must fail, and the docs' ACLs."""
    tag = uuid.uuid4().hex[:8]
    source, out, failing = f"in-{tag}", f"out-{tag}", f"fail-{tag}"
    for topic in (source, out, failing):
        scram.create_topic(topic, PARTITIONS, user="admin")
    committed_batches(scram.bootstrap_servers, source, INPUT, **_admin(scram))
    return _grant(scram, source, (out, failing), f"acl-{tag}-")


def _nothing_open(granted: Granted, topic: str) -> None:
    """No transaction pins ``topic`` and none is open under the prefix (as the super
    user)."""
    kafka = granted.kafka
    assert_nothing_open(kafka.bootstrap_servers, topic, PARTITIONS, **_admin(kafka))
    assert open_transactions(kafka.bootstrap_servers, granted.prefix, _admin(kafka)) == {}


def test_pipeline_is_exactly_once_with_the_documented_acls(
    spark: SparkSession, granted: Granted, tmp_path: Path
) -> None:
    kafka, out = granted.kafka, granted.outputs[0]
    app = _app_options()
    start = pipeline(
        spark, kafka.bootstrap_servers, granted.source, out, granted.prefix, tmp_path / "cp",
        maxOffsetsPerTrigger="12", **app,
    )  # fmt: skip
    query = start(app)
    completes(query)
    assert len(query.recentProgress) >= 2  # several micro-batches, each committed
    assert committed_values(kafka.bootstrap_servers, out, **_admin(kafka)) == input_values()
    _nothing_open(granted, out)


@pytest.mark.parametrize("command", REQUIRED, ids=lambda c: c.label)
def test_without_one_documented_acl_the_query_fails_naming_it(
    spark: SparkSession, granted: Granted, tmp_path: Path, command: DocCommand
) -> None:
    kafka, failing = granted.kafka, granted.outputs[1]
    # The line as run for the output topic of this test (the other one keeps its ACLs).
    args = granted.runs(command)[-1]
    assert args[0] == "--add"
    missing = _acl_of(args)
    _acls_tool(kafka, "--remove", "--force", *args[1:])
    try:
        assert _listed(kafka) == granted.all_acls() - {missing}  # really gone, only it
        app = _app_options()
        start = pipeline(
            spark, kafka.bootstrap_servers, granted.source, failing, granted.prefix,
            tmp_path / "cp", **app,
        )  # fmt: skip
        query = start(app)
        with pytest.raises(StreamingQueryException) as failure:
            query.awaitTermination(HANG_S)
    finally:
        _acls_tool(kafka, *args)
    text = str(failure.value)
    assert "AuthorizationError: not authorized" in text, text
    # The refused operation (the ACL's own, or the Describe it implies) on the resource...
    flag = next(a for a in args if a in _RESOURCES)
    operation = missing[4]
    resource = rf"(?:{operation}|DESCRIBE) on {_RESOURCES[flag][1]} '{re.escape(missing[1])}"
    assert re.search(resource, text), f"{resource!r} not in the error: {text}"
    # ...and, as the ACL that allows it, the docs' line itself.
    assert shlex.join(args[1:]) in text, f"{shlex.join(args[1:])!r} not in the error: {text}"
    for secret in (APP_PASSWORD, ADMIN_PASSWORD):
        assert secret not in text
    assert query.lastProgress is None  # it failed in its first micro-batch
    assert committed_values(kafka.bootstrap_servers, failing, **_admin(kafka)) == Counter()
    _nothing_open(granted, failing)


# -- TLS -------------------------------------------------------------------------------------


def test_tls_client_certificate_batch_write_and_read_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """SSL only, client certificates required, the authorizer on: ``CN=app`` maps to
    ``User:app``, which holds the writer's documented ACLs and nothing else."""
    tls = tls_files(tmp_path)
    app_pem = tmp_path / "app.pem"  # the app's key and certificate chain, one PEM file
    tls.authority.issue_cert(APP, common_name=APP).private_key_and_cert_chain_pem.write_to_path(
        str(app_pem)
    )
    security = Security(
        protocol="SSL",
        tls_dir=tmp_path,
        authorizer=True,
        super_users=(cert_principal(tls.client),),  # the admin: client.pem, no CN
    )
    mapping = {"ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"}
    tag = uuid.uuid4().hex[:8]
    topic, prefix = f"tls-{tag}", f"tls-{tag}-"
    with ApacheKafka(security=security, config=mapping) as kafka:
        kafka.create_topic(topic, PARTITIONS)
        _grant(kafka, topic, (topic,), prefix)
        options = {
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(tls.ca),
            "kafka.ssl.keystore.type": "PEM",
            "kafka.ssl.keystore.location": str(app_pem),
        }
        rows = [(f"k{i}", f"tls-{i}") for i in range(20)]
        (
            spark.createDataFrame(rows, "key string, value string")
            .write.format("kafka_txn")
            .options(**options)
            .option("topic", topic)
            .option("transactionalIdPrefix", prefix)
            .mode("append")
            .save()
        )
        expected = Counter(v.encode() for _, v in rows)
        admin = {**kafka.client_config(), "log_level": 0}
        assert committed_values(kafka.bootstrap_servers, topic, **admin) == expected
        assert_nothing_open(kafka.bootstrap_servers, topic, PARTITIONS, **admin)
        read = spark.read.format("kafka_txn").options(**options).option("subscribe", topic).load()
        assert Counter(bytes(r.value) for r in read.select("value").collect()) == expected
