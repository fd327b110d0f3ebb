"""``make test``'s lanes: all run at once, each lane's legs in order, each output printed
whole and in order, every leg timed, and a failed leg fails the whole."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.lanes import Leg, main, run_lanes


def test_lanes_run_at_once_and_print_in_order(
    capfd: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAFKA_TXN_LEG_TIMES", raising=False)  # not into CI's own table
    # Lane 1 waits for a file only lane 2 writes: they can only both end if they overlap.
    flag = tmp_path / "flag"
    lanes = [
        [
            Leg(
                "wait",
                f"for i in $(seq 300); do [ -e {flag} ] && break; sleep 0.1; done; "
                f"[ -e {flag} ] && echo one",
            ),
            Leg("after", "echo one-after"),
        ],
        [Leg("touch", f"touch {flag}; echo two")],
    ]
    assert run_lanes(lanes) == 0
    out = capfd.readouterr().out
    assert out.index("lane 1: wait, after") < out.index("one") < out.index("one-after")
    assert out.index("one-after") < out.index("lane 2: touch") < out.index("two")
    for name in ("wait", "after", "touch"):
        assert re.search(rf"^\d\s+{name}\s+0\s+\d+\.\d$", out, re.MULTILINE), out
    assert "failed: none" in out


def test_a_failed_leg_fails_the_whole_and_stops_its_lane(
    capfd: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    times = tmp_path / "times"
    monkeypatch.setenv("KAFKA_TXN_LEG_TIMES", str(times))
    code = main(
        ["--lane", "fine=echo fine", "--lane", "broken=echo broken; exit 3", "never=echo NEVER-RAN"]
    )
    assert code == 1
    out = capfd.readouterr().out
    assert "broken" in out and "NEVER-RAN" not in out
    assert re.search(r"^2\s+broken\s+3\s", out, re.MULTILINE), out
    assert re.search(r"^2\s+never\s+-\s", out, re.MULTILINE), out
    assert "failed: broken" in out
    assert "failed: broken" in times.read_text()  # .ci/run prints it at the end


def test_a_leg_without_a_name_is_a_usage_error(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--lane", "echo no name"])
    assert exit_.value.code == 2
    assert "a leg is NAME=COMMAND" in capfd.readouterr().err
