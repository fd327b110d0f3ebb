"""Lingering transactions: ``writer.open_transactions`` and ``kafka-txn transactions list|abort``
against embedded clusters over TCP (transaction version 1 and 2, a SASL listener).

A transaction prepared by our producer and never ended pins the LSO of its partitions;
after the abort a librdkafka read_committed consumer must read to the high watermark and
see every committed record and none of the aborted ones.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from pyspark_kafka_txn import cli
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import (
    PreparedTransaction,
    ProducerConfig,
    TransactionalProducer,
    end_transaction,
)
from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import TransactionNotAbortedError
from pyspark_kafka_txn.writer.open_transactions import (
    abort_open_transaction,
    find_open_transactions,
)
from tests.support.clusters import CheckedKafka
from tests.support.lso import pinned_partitions
from tests.support.target import KafkaTarget, transaction_versions
from tests.support.writer_options import fresh_prefix

HANG_S = 60.0  # hang detector, never a timing assertion

PARTITIONS = 2


def _start(**settings: object) -> Iterator[EmbeddedKafka]:
    with CheckedKafka(**settings) as kafka:
        yield kafka


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _topic(kafka: KafkaTarget, partitions: int = PARTITIONS) -> str:
    return kafka.create_topic(partitions, prefix="ling")


def _embedded_tv(request: pytest.FixtureRequest, tv: int) -> tuple[EmbeddedKafka, str, str]:
    """The embedded cluster of transaction version ``tv``, a new topic on it and a fresh
    ``transactionalIdPrefix``."""
    target: KafkaTarget = request.getfixturevalue(f"kafka_tv{tv}")
    return target.require_embedded(), _topic(target), fresh_prefix("p")


def _values(tag: str, n: int = 6) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def _write(
    config: ProducerConfig, topic: str, values: list[bytes], *, commit: bool | None
) -> PreparedTransaction:
    """One transaction over every partition of ``topic``: committed (True), aborted
    (False) or prepared and left open (None). Returns the handle it had before ending."""
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        parts = pa.array([i % PARTITIONS for i in range(len(values))], pa.int32())
        producer.produce(topic, pa.array(values, pa.binary()), partitions=parts)
        handle = producer.prepare()
        if commit is not None:
            end_transaction(producer.cluster, handle, commit=commit)
    return handle


def _in_read_order(values: list[bytes]) -> list[bytes]:
    """``_write`` puts value i on partition i % 2; a reader returns partition 0 first."""
    return values[0::2] + values[1::2]


def _high_watermarks(bootstrap: str, topic: str, isolation: str, **conf: str) -> list[int]:
    """Per partition: the high watermark (read_uncommitted) or the LSO (read_committed)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation, **conf}
    )
    try:
        return [
            int(consumer.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1])
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def _read_committed_to_end(
    bootstrap: str, topic: str, timeout_s: float = 10.0, **conf: str
) -> list[bytes]:
    """Values a read_committed librdkafka consumer reads until its position reaches the
    high watermark of every partition (it cannot while an open transaction pins the LSO)."""
    ends = _high_watermarks(bootstrap, topic, "read_uncommitted", **conf)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ling-{_uid()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            **conf,
        }
    )
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
        consumer.assign(tps)
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        # An empty partition keeps the invalid position -1001: nothing to reach there.
        while any(
            end > 0 and tp.offset < end
            for tp, end in zip(consumer.position(tps), ends, strict=True)
        ):
            assert time.monotonic() < deadline, (
                f"read_committed position {consumer.position(tps)} did not reach {ends}"
            )
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, str(err)
                continue
            out.append((msg.partition() or 0, msg.offset() or 0, msg.value() or b""))
        return [value for _, _, value in sorted(out)]
    finally:
        consumer.close()


def _run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["transactions", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("cluster_tv", "producer_tv"),
    [
        pytest.param(
            tv, client, id=f"tv{client}" + ("-client-on-tv2-cluster" if tv > client else "")
        )
        for tv in transaction_versions()
        for client in range(tv, 0, -1)
    ],
)
def test_find_list_and_abort_a_lingering_transaction(
    request: pytest.FixtureRequest,
    kafka: KafkaTarget,
    capsys: pytest.CaptureFixture[str],
    cluster_tv: int,
    producer_tv: int,
) -> None:
    kafka = request.getfixturevalue(f"kafka_tv{cluster_tv}")
    bs = kafka.bootstrap_servers
    topic, other_topic = _topic(kafka), _topic(kafka)
    run = _uid()
    prefix, other_prefix = f"p-{run}-", f"q-{run}-"
    lingering_id, other_id = f"{prefix}query-0", f"{other_prefix}query-0"

    def config(tid: str) -> ProducerConfig:
        return ProducerConfig(bs, tid, transaction_version=producer_tv)

    lingering = _write(config(lingering_id), topic, _values("lingering"), commit=None)
    other = _write(config(other_id), other_topic, _values("other"), commit=None)
    committed = _values("committed")
    _write(config(f"c-{run}"), topic, committed, commit=True)
    assert pinned_partitions(bs, topic, PARTITIONS)  # the committed rows sit behind it

    with ClusterClient(bs) as cluster:
        found = find_open_transactions(cluster, prefix)
        assert [t.transactional_id for t in found] == [lingering_id]
        [txn] = found
        assert (txn.producer_id, txn.producer_epoch) == (
            lingering.producer_id,
            lingering.producer_epoch,
        )
        assert txn.state == "Ongoing" and not txn.completing
        assert txn.partitions == ((topic, 0), (topic, 1))
        assert txn.timeout_ms == ProducerConfig(bs, "x").transaction_timeout_ms
        assert 0 <= txn.age_ms() < 60_000
        assert txn.age_ms(txn.start_time_ms + 1234) == 1234
        assert [t.transactional_id for t in find_open_transactions(cluster, f"p-{run}")] == [
            lingering_id
        ]

    code, out, err = _run_cli(capsys, "list", "--bootstrap-servers", bs, "--prefix", prefix)
    assert (code, err) == (0, "")
    line = next(row for row in out.splitlines() if row.startswith(lingering_id))
    fields = line.split("\t")
    assert fields[1:4] == ["Ongoing", str(lingering.producer_id), str(lingering.producer_epoch)]
    assert fields[5] == f"{topic}-0,{topic}-1"
    assert other_id not in out
    assert out.splitlines()[-1] == f"1 open transaction(s) with prefix '{prefix}'"

    # Younger than --min-age-ms, or --dry-run: left alone.
    code, out, _ = _run_cli(
        capsys, "abort", "--bootstrap-servers", bs, "--prefix", prefix, "--min-age-ms", "3600000"
    )
    assert code == 0 and lingering_id not in out and "1 younger one(s) left alone" in out
    code, out, _ = _run_cli(
        capsys, "abort", "--bootstrap-servers", bs, "--prefix", prefix, "--dry-run"
    )
    assert code == 0 and out.startswith(f"would abort\t{lingering_id}\tOngoing")
    assert pinned_partitions(bs, topic, PARTITIONS)

    code, out, err = _run_cli(capsys, "abort", "--bootstrap-servers", bs, "--prefix", prefix)
    assert (code, err) == (0, "")
    first, last = out.splitlines()
    assert first.startswith(f"aborted\t{lingering_id}\tOngoing\t{lingering.producer_id}\t")
    assert last == f"ended 1 of 1 open transaction(s) with prefix '{prefix}'"

    assert _read_committed_to_end(bs, topic) == _in_read_order(committed)
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, prefix) == []
        # The other prefix's transaction is untouched, still open with its epoch.
        [still] = find_open_transactions(cluster, other_prefix)
        assert (still.transactional_id, still.state, still.producer_epoch) == (
            other_id,
            "Ongoing",
            other.producer_epoch,
        )
        # As librdkafka sees it: the other topic still pinned by its open transaction.
        assert sorted(pinned_partitions(bs, other_topic, PARTITIONS)) == [0, 1]
        end_transaction(cluster, other, commit=False)
    code, out, _ = _run_cli(capsys, "list", "--bootstrap-servers", bs, "--prefix", prefix)
    assert (code, out) == (0, f"0 open transaction(s) with prefix '{prefix}'\n")


@pytest.mark.embedded_only("loses EndTxn answers and refuses EndTxn with chosen errors")
@pytest.mark.parametrize("tv", [1, 2])
def test_abort_counts_a_transaction_ended_meanwhile_as_done(
    request: pytest.FixtureRequest, tv: int
) -> None:
    kafka, topic, prefix = _embedded_tv(request, tv)
    bs = kafka.bootstrap_servers

    def lingering(n: int) -> PreparedTransaction:
        config = ProducerConfig(bs, f"{prefix}{n}", transaction_version=tv)
        return _write(config, topic, _values(f"gone{n}"), commit=None)

    owned, fenced, refused = lingering(0), lingering(1), lingering(2)
    with ClusterClient(bs) as cluster:
        by_id = {t.transactional_id: t for t in find_open_transactions(cluster, prefix)}
        assert sorted(by_id) == [f"{prefix}{n}" for n in range(3)]
        # Its owner aborts it after we found it: nothing left for us to do.
        end_transaction(cluster, owned, commit=False)
        abort_open_transaction(cluster, by_id[owned.transactional_id])
        # Our abort is executed but answered as fenced / in the wrong state (e.g. a
        # timeout sweep got there first): described again, no longer open, success.
        lost = kafka.fail_requests("EndTxn", "producer_fenced", after=True)
        abort_open_transaction(cluster, by_id[fenced.transactional_id])
        refusal = kafka.fail_requests("EndTxn", "invalid_txn_state")  # refused, not executed
        abort_open_transaction(cluster, by_id[refused.transactional_id])  # still open: again
        assert (lost.hits, refusal.hits) == (1, 1)  # both answers really were wrong
        for txn in by_id.values():
            abort_open_transaction(cluster, txn)  # repeat: nothing left to do
        assert find_open_transactions(cluster, prefix) == []
    # Three aborted transactions of six records over two partitions, each with its marker.
    assert _high_watermarks(bs, topic, "read_uncommitted") == [12, 12]
    assert _read_committed_to_end(bs, topic) == []


@pytest.mark.embedded_only("refuses EndTxn with a chosen error")
def test_an_abort_that_fails_exits_1(
    kafka_tv2: KafkaTarget, capsys: pytest.CaptureFixture[str]
) -> None:
    bs = kafka_tv2.bootstrap_servers
    topic = _topic(kafka_tv2)
    prefix = fresh_prefix("p")
    handle = _write(ProducerConfig(bs, f"{prefix}0"), topic, [b"x"], commit=None)
    refusal = kafka_tv2.require_embedded().fail_requests(
        "EndTxn", "transactional_id_authorization_failed"
    )
    code, out, err = _run_cli(capsys, "abort", "--bootstrap-servers", bs, "--prefix", prefix)
    assert refusal.hits == 1
    assert pinned_partitions(bs, topic, 1) == {0: ((0, 0), (0, 1))}  # still open: librdkafka
    assert code == 1
    assert out == f"ended 0 of 1 open transaction(s) with prefix '{prefix}'\n"
    assert f"could not end '{prefix}0': not authorized: WRITE on TransactionalId '{prefix}0'" in err
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED [53]" in err
    assert err.endswith("1 transaction(s) could not be ended\n")
    with ClusterClient(bs) as cluster:
        [txn] = find_open_transactions(cluster, prefix)
        assert txn.producer_epoch == handle.producer_epoch
        abort_open_transaction(cluster, txn)


def test_abort_leaves_the_next_transaction_of_a_live_producer_alone(
    kafka_tv1: KafkaTarget,
) -> None:
    """TV1 keeps the epoch across transactions: (producer id, epoch) alone would let a
    stale abort hit the live producer's next transaction; the start time does not."""
    bs = kafka_tv1.bootstrap_servers
    topic = _topic(kafka_tv1)
    prefix = fresh_prefix("p")
    first, second = _values("first"), _values("second")
    with (
        ClusterClient(bs) as cluster,
        TransactionalProducer(ProducerConfig(bs, f"{prefix}0", transaction_version=1)) as live,
    ):
        live.init_transactions()
        live.begin_transaction()
        live.produce(topic, pa.array(first), partitions=0)
        live.flush()
        [stale] = find_open_transactions(cluster, prefix)
        live.commit_transaction()
        while int(time.time() * 1000) <= stale.start_time_ms:  # the next start is later
            time.sleep(0.001)
        live.begin_transaction()
        live.produce(topic, pa.array(second), partitions=0)
        live.flush()
        [current] = find_open_transactions(cluster, prefix)
        assert current.producer_epoch == stale.producer_epoch
        assert current.start_time_ms > stale.start_time_ms
        abort_open_transaction(cluster, stale)
        assert find_open_transactions(cluster, prefix) == [current]
        live.commit_transaction()
    assert _read_committed_to_end(bs, topic) == first + second


@pytest.mark.embedded_only("delays the coordinator's transaction markers")
@pytest.mark.parametrize("tv", [1, 2])
def test_a_completing_commit_is_waited_for_not_aborted(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], tv: int
) -> None:
    kafka, topic, prefix = _embedded_tv(request, tv)
    bs = kafka.bootstrap_servers
    values = _values("decided")
    handle = _write(
        ProducerConfig(bs, f"{prefix}0", transaction_version=tv), topic, values, commit=None
    )
    kafka.set_marker_delay(3.0)  # the window in which the listing and the CLI must run
    try:
        with ClusterClient(bs) as cluster:
            end_transaction(cluster, handle, commit=True)  # PrepareCommit for 3 s
            [txn] = find_open_transactions(cluster, prefix)
            assert txn.state == "PrepareCommit" and txn.completing
            code, out, err = _run_cli(
                capsys, "abort", "--bootstrap-servers", bs, "--prefix", prefix
            )
            assert (code, err) == (0, "")
            assert out.startswith(f"completed\t{prefix}0\tPrepareCommit")
            assert find_open_transactions(cluster, prefix) == []
    finally:
        kafka.set_marker_delay(0.0)
    assert _read_committed_to_end(bs, topic) == _in_read_order(values)


@pytest.mark.embedded_only("delays the coordinator's transaction markers")
def test_a_stuck_prepare_commit_is_reported(kafka_tv2: KafkaTarget) -> None:
    embedded = kafka_tv2.require_embedded()
    bs = kafka_tv2.bootstrap_servers
    topic = _topic(kafka_tv2)
    prefix = fresh_prefix("p")
    handle = _write(
        ProducerConfig(bs, f"{prefix}0", transaction_version=2), topic, [b"x"], commit=None
    )
    embedded.set_marker_delay(8.0)  # far beyond the abort's 0.3 s budget
    try:
        with ClusterClient(bs) as cluster:
            end_transaction(cluster, handle, commit=True)
            [txn] = find_open_transactions(cluster, prefix)
            with pytest.raises(TransactionNotAbortedError, match="is still PrepareCommit"):
                abort_open_transaction(cluster, txn, timeout_s=0.3)
            # It gave up within its budget, not when the markers landed: still completing.
            assert [t.state for t in find_open_transactions(cluster, prefix)] == ["PrepareCommit"]
    finally:
        embedded.set_marker_delay(0.0)
    assert _read_committed_to_end(bs, topic, timeout_s=60) == [b"x"]


# --- secured cluster ------------------------------------------------------------------

ADMIN_PASSWORD = "Adm1n-s3cret-4a7c"
WRONG_PASSWORD = "Wr0ng-s3cret-9b1d"
STORE_PASSWORD = "St0re-s3cret-2e6f"


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", users={"admin": ADMIN_PASSWORD})
    yield from _start(security=security)


def test_sasl_command_config_and_secrets(
    sasl_kafka: EmbeddedKafka,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn")
    bs = sasl_kafka.bootstrap_servers
    sasl = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "admin",
        "sasl.password": ADMIN_PASSWORD,
    }
    topic = _topic(KafkaTarget(sasl_kafka.bootstrap_servers, sasl_kafka))
    prefix = fresh_prefix("p")
    config = ProducerConfig.from_options(
        {"bootstrap.servers": bs, "transactional.id": f"{prefix}0", **sasl}
    )
    handle = _write(config, topic, _values("secure"), commit=None)
    # As kafka-transactions.sh --command-config: JAAS line continued over two lines, a
    # comment, and a key this tool does not take (Kafka's inline PEM key: ignored, value
    # never shown).
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "# admin client\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism : SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n"
        f'    required username="admin" password="{ADMIN_PASSWORD}";\n'
        f"ssl.keystore.key={STORE_PASSWORD}\n"
    )
    common = ["--bootstrap-servers", bs, "--prefix", prefix, "--command-config", str(properties)]
    code, out, err = _run_cli(capsys, "list", *common)
    assert code == 0, err
    assert f"{prefix}0\tOngoing\t{handle.producer_id}\t" in out
    assert "'ssl.keystore.key'" in err
    # -X credentials replace the file's: a wrong password fails authentication, said so,
    # at once: not retried until --timeout-s (600 s here, ten times the hang detector).
    started = time.monotonic()
    wrong = ["-X", "sasl.username=admin", "-X", f"sasl.password={WRONG_PASSWORD}"]
    code, out2, err2 = _run_cli(capsys, "list", *common, *wrong, "--timeout-s", "600")
    assert code == 1 and "authentication" in err2 and time.monotonic() - started < HANG_S
    code, out3, err3 = _run_cli(capsys, "abort", *common)
    assert code == 0, err3
    assert out3.startswith(f"aborted\t{prefix}0\t")
    for text in (out, err, out2, err2, out3, err3, caplog.text):
        for secret in (ADMIN_PASSWORD, WRONG_PASSWORD, STORE_PASSWORD):
            assert secret not in text
    assert _read_committed_to_end(bs, topic, **sasl) == []


# --- usage and unreachable clusters -----------------------------------------------------


def test_unreachable_bootstrap_fails_in_bounded_time() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pyspark_kafka_txn", "transactions", "list"),
            *("--bootstrap-servers", f"127.0.0.1:{port}", "--prefix", "p-", "--timeout-s", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert f"cannot reach the cluster at 127.0.0.1:{port} within 1 s" in proc.stderr
    assert "Connection refused" in proc.stderr


#: --timeout-s of the bound tests: long enough that the command's old 2x overrun (nested
#: retry loops, each with the whole budget) exceeds the hang margin below.
_BOUND_S = 6.0
#: What a loaded 2-core machine may add to --timeout-s: the 1 s a blocked worker is given
#: after the deadline, and scheduling (a generous hang margin; the command runs in the
#: test's process, so no interpreter start is counted).
_BOUND_MARGIN_S = 5.0


@pytest.mark.parametrize("broker", ["refusing", "silent"])
def test_timeout_bounds_the_whole_command(broker: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--timeout-s is the wall-clock bound of `transactions list`: a port that refuses
    connections, or a listener that accepts them and never answers, ends it within the
    bound with one line naming --timeout-s (it took twice --timeout-s before). Run in this
    process, so that an interpreter's start on a loaded machine is not counted."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        if broker == "refusing":
            listener.close()  # nobody listens on the port any more
        started = time.monotonic()
        code, out, err = _run_cli(
            capsys, "list", "--bootstrap-servers", f"127.0.0.1:{port}", "--prefix", "p-",
            "--timeout-s", f"{_BOUND_S:g}",
        )  # fmt: skip
        took_s = time.monotonic() - started
    assert (code, out) == (1, ""), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"within {_BOUND_S:g} s (--timeout-s)" in err
    assert took_s < _BOUND_S + _BOUND_MARGIN_S, f"took {took_s:.1f} s"


def test_timeout_gives_up_on_a_call_that_never_returns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever blocks past --timeout-s (a name lookup, a socket without a timeout), the
    command gives up after it with one line and exit status 1."""
    release = threading.Event()

    def blocked(*_args: object) -> int:
        release.wait(HANG_S)
        return 0

    monkeypatch.setattr(cli, "_list_or_abort", blocked)
    started = time.monotonic()
    try:
        code, out, err = _run_cli(
            capsys, "list", "--bootstrap-servers", "127.0.0.1:1", "--prefix", "p-",
            "--timeout-s", "0.5",
        )  # fmt: skip
    finally:
        release.set()
    took_s = time.monotonic() - started
    assert (code, out) == (1, "")
    assert err == (
        "kafka-txn transactions list: gave up after 0.5 s (--timeout-s): no answer from the "
        "cluster at 127.0.0.1:1\n"
    )
    assert took_s < 0.5 + _BOUND_MARGIN_S


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["abort", "--prefix", ""], "--prefix must not be empty"),
        (["list", "--prefix", "p-", "-X", "sasl.password"], "-X expects KEY=VALUE"),
        (["list", "--prefix", "p-", "-X", "sasl.pasword=x"], "-X sasl.pasword: unknown option"),
        (["list", "--prefix", "p-", "--command-config", "/nonexistent.properties"], "cannot read"),
        (["list", "--prefix", "p-", "-X", "security.protocol=SASL_SSL"], "username and password"),
        (
            ["list", "--prefix", "p-", "-X", "ssl.truststore.location=/ts.jks"],
            "'ssl.truststore.location': cannot read '/ts.jks'",
        ),
    ],
)
def test_bad_usage_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _run_cli(capsys, *argv, "--bootstrap-servers", "127.0.0.1:1")
    assert (code, out) == (2, "")
    assert message in err and err.startswith(f"kafka-txn transactions {argv[0]}: ")


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["list", "--bootstrap-servers", "h:1", "--prefix", "p", "--timeout-s", "0"],
        ["list", "--bootstrap-servers", "h:1", "--prefix", "p", "--min-age-ms", "-5"],
        ["list", "--prefix", "p"],
        ["list", "--bootstrap-servers", "h:1", "--prefix", "p", "--dry-run"],
        ["list", "--bootstrap-servers", "nohost", "--prefix", "p"],
    ):
        with pytest.raises(SystemExit) as info:
            cli.main(["transactions", *argv])
        assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--timeout-s" in err
    assert "argument --bootstrap-servers: bootstrap.servers: 'nohost' is not host:port" in err
