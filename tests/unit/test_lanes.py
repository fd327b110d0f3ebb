"""``make test``'s lanes: all run at once, each output printed whole and in order, and a
failed lane fails the whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lanes import run_lanes


def test_lanes_run_at_once_and_print_in_order(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Lane 1 waits for a file only lane 2 writes: they can only both end if they overlap.
    flag = tmp_path / "flag"
    lanes = [
        f"for i in $(seq 300); do [ -e {flag} ] && break; sleep 0.1; done; "
        f"[ -e {flag} ] && echo one",
        f"touch {flag}; echo two",
    ]
    assert run_lanes(lanes) == 0
    out = capfd.readouterr().out
    assert out.index("lane 1 (exit 0)") < out.index("one") < out.index("lane 2 (exit 0)")
    assert out.index("lane 2 (exit 0)") < out.index("two")
    assert "failed: none" in out


def test_a_failed_lane_fails_the_whole(capfd: pytest.CaptureFixture[str]) -> None:
    assert run_lanes(["echo fine", "echo broken; exit 3"]) == 1
    out = capfd.readouterr().out
    assert "lane 2 (exit 3)" in out and "broken" in out and "failed: [2]" in out
