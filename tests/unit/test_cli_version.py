"""``kafka-txn --version`` prints the package's version (the one in the wheel's metadata);
``--help`` is plain text with the defaults."""

from __future__ import annotations

import pytest

import pyspark_kafka_txn
from pyspark_kafka_txn.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"kafka-txn {pyspark_kafka_txn.__version__}\n"


def test_help_shows_defaults_and_warns_about_aborting_live_batches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Help is plain text (no reST markup), with the defaults; `transactions abort` warns
    that --min-age-ms 0 also ends the batches live queries are committing."""

    def help_of(*argv: str) -> str:
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        return " ".join(capsys.readouterr().out.split())

    top = help_of()
    assert "``" not in top and ":class:" not in top
    aborting = help_of("transactions", "abort")
    assert "(default: 0)" in aborting and "(default: 10.0)" in aborting
    assert "live queries are writing or committing now" in aborting
    assert "(default: 9092)" in help_of("broker")
