"""``kafka-txn --version`` prints the package's version (the one in the wheel's metadata);
``--help`` is plain text with the defaults."""

from __future__ import annotations

import argparse

import pytest

import pyspark_kafka_txn
from pyspark_kafka_txn.cli import build_parser, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"kafka-txn {pyspark_kafka_txn.__version__}\n"


def test_help_shows_defaults_and_says_live_queries_are_spared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Help is plain text (no reST markup), with the defaults; `transactions abort` says
    that live queries are left alone unless --include-live."""

    def help_of(*argv: str) -> str:
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        return " ".join(capsys.readouterr().out.split())

    top = help_of()
    assert "``" not in top and ":class:" not in top
    aborting = help_of("transactions", "abort")
    assert "(default: 0)" in aborting and "(default: 10.0)" in aborting
    assert (
        "The transactions of live queries (lease renewed) are left alone unless --include-live"
        in aborting
    )
    assert "(default: 9092)" in help_of("broker")


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser, by its program name."""
    out: list[tuple[str, argparse.ArgumentParser]] = []
    pending = [build_parser()]
    while pending:
        parser = pending.pop()
        out.append((parser.prog, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
    return out


def test_every_command_and_option_has_help() -> None:
    """Each command has a description and a line in its parent's list; each option a
    help text. ``demo`` says it needs Java (Spark runs in a JVM)."""
    parsers = dict(_parsers())
    assert set(parsers) == {
        "kafka-txn",
        "kafka-txn broker",
        "kafka-txn demo",
        "kafka-txn transactions",
        "kafka-txn transactions list",
        "kafka-txn transactions abort",
    }
    for prog, parser in parsers.items():
        assert parser.description, prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                listed = {a.dest: a.help for a in action._choices_actions}
                assert set(listed) == set(action.choices), prog
                assert all(listed.values()), (prog, listed)
            assert action.help, (prog, action.dest)
    assert "Java 17" in (parsers["kafka-txn demo"].description or "")
