"""``kafka-txn broker --initial-producer-epoch N``: the test aid through the command line."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer

from tests.support.clients import (
    describe_transaction,
    free_port,
    start_cli_broker,
    stop_cli_broker,
)


def test_new_transactional_ids_start_at_the_given_epoch_and_roll_over() -> None:
    proc, bootstrap = start_cli_broker(
        "--port", str(free_port()), "--initial-producer-epoch", "32765", "--topic", "t"
    )
    try:
        tid = f"cli-{uuid.uuid4().hex[:8]}"
        seen = []
        for _ in range(3):  # 32765, 32766 (exhausted), then a new producer id at 32765
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
            producer.init_transactions(10)
            described = describe_transaction(bootstrap, tid)
            seen.append((described.producer_id, described.producer_epoch))
            del producer
        assert [e for _, e in seen] == [32765, 32766, 32765]
        assert seen[0][0] == seen[1][0] != seen[2][0]
    finally:
        code, _ = stop_cli_broker(proc, signal.SIGTERM)
    assert code == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("32767", "must be an integer in 0..32766"),
        ("-1", "must be an integer in 0..32766"),
        ("many", "'many' is not an integer"),
    ],
)
def test_out_of_range_value_is_a_usage_error(value: str, message: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pyspark_kafka_txn", "broker", "--initial-producer-epoch", value],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "--initial-producer-epoch" in out.stderr and message in out.stderr
    assert out.stdout == ""
