"""``kafka-txn --version`` prints the package's version (the one in the wheel's metadata)."""

from __future__ import annotations

import pytest

import pyspark_kafka_txn
from pyspark_kafka_txn.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"kafka-txn {pyspark_kafka_txn.__version__}\n"
