"""Every test kept out of ``make test`` (marker ``compat``) is listed, with what covers its
situation, in docs/compatibility.md's "What runs in ``make compat`` only" table.

A test moved to ``make compat`` for CI's time must never vanish from view: the table says
why it left, what in ``make test`` still covers its situation and when it last ran.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "compatibility.md"


def _is_compat_mark(node: ast.expr) -> bool:
    """``pytest.mark.compat`` (or ``mark.compat``) as a decorator."""
    return isinstance(node, ast.Attribute) and node.attr == "compat"


def compat_tests() -> list[str]:
    """``path::name`` of every test function decorated with the ``compat`` marker."""
    found: list[str] = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                _is_compat_mark(d) for d in node.decorator_list
            ):
                found.append(f"{path.relative_to(ROOT).as_posix()}::{node.name}")
    return found


def _rows() -> list[list[str]]:
    """The cells of each row of the page's make-compat table (its header excluded)."""
    text = PAGE.read_text()
    start = text.index("### What runs in `make compat` only")
    table = text[start : text.index("\n## ", start)]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| `")
    ]


def _listed(rows: list[list[str]]) -> set[str]:
    """The tests the rows name in their first cell (``path::name``; a row naming whole
    modules stands for a leg's selection, not a marked test)."""
    return {m.group(1) for row in rows if (m := re.match(r"`(tests/[^`]+::[^`]+)`", row[0]))}


def test_every_compat_test_is_listed_with_its_cover() -> None:
    tests = compat_tests()
    assert len(tests) >= 4, tests  # the scan finds the markers (never vacuous)
    rows = _rows()
    listed = _listed(rows)
    missing = [t for t in tests if t not in listed]
    assert missing == [], f"add to docs/compatibility.md's make-compat table: {missing}"
    for row in rows:
        assert len(row) == 4 and all(row), row  # why, covered by, last run: all said


def test_the_table_lists_no_test_that_runs_in_make_test() -> None:
    listed = _listed(_rows())
    assert listed, "the table lists no test"
    assert listed <= set(compat_tests()), listed - set(compat_tests())
