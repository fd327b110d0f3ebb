"""The shared hang detectors end before pytest's per-test timeout."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

from tests.support.hang import HANG_S, LONG_HANG_S, TEST_TIMEOUT_S

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_per_test_timeout_is_pyprojects() -> None:
    addopts = tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    [timeout] = [a.split("=", 1)[1] for a in shlex.split(addopts) if a.startswith("--timeout=")]
    assert float(timeout) == TEST_TIMEOUT_S


def test_hang_detectors_end_before_the_test_timeout() -> None:
    assert HANG_S < LONG_HANG_S <= TEST_TIMEOUT_S - 60
