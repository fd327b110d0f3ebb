"""The bad-option difference table of ``docs/migration.md`` is the parity test's table.

``docs/migration.md`` keeps a copy between ``<!-- parity:bad-options:begin -->`` and
``<!-- parity:bad-options:end -->``; regenerate it with
``python -m tests.support.parity_bad_options``. The rows come from
:data:`tests.support.parity_bad_options.CASES`, which
``tests/reader/test_parity_reader.py::test_bad_option`` checks against both connectors.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.parity_bad_options import CASES, markdown_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "migration.md"
BEGIN = "<!-- parity:bad-options:begin -->"
END = "<!-- parity:bad-options:end -->"


def test_doc_table_is_the_parity_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"{DOC} needs one of each marker"
    embedded = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    assert embedded.strip("\n") == markdown_table().strip("\n")


def test_every_difference_says_why() -> None:
    for name, case in CASES.items():
        assert bool(case.why) == case.differs, f"{name}: a reason exactly where they differ"
