"""The option tables in docs/reader.md and docs/writer.md are the registry's tables.

Regenerate a table with ``python -m pyspark_kafka_txn.options.registry reader|writer`` and
paste it between the doc's ``<!-- options:SCOPE:begin -->`` / ``<!-- options:SCOPE:end -->``
marker lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from pyspark_kafka_txn.options.registry import OPTIONS, markdown_table

DOCS = Path(__file__).resolve().parents[2] / "docs"
Scope = Literal["reader", "writer"]
SCOPES: tuple[Scope, ...] = ("reader", "writer")


def _doc(scope: Scope) -> str:
    return (DOCS / f"{scope}.md").read_text(encoding="utf-8")


def _embedded(scope: Scope) -> str:
    text = _doc(scope)
    begin = f"<!-- options:{scope}:begin -->"
    end = f"<!-- options:{scope}:end -->"
    assert text.count(begin) == 1, f"docs/{scope}.md needs exactly one {begin!r} line"
    assert text.count(end) == 1, f"docs/{scope}.md needs exactly one {end!r} line"
    start = text.index(begin) + len(begin)
    stop = text.index(end)
    assert start <= stop, f"docs/{scope}.md: {end!r} comes before {begin!r}"
    return text[start:stop]


@pytest.mark.parametrize("scope", SCOPES)
def test_doc_table_is_the_registry_table(scope: Scope) -> None:
    """Regenerate with ``python -m pyspark_kafka_txn.options.registry <scope>``."""
    assert _embedded(scope).strip("\n") == markdown_table(scope).strip("\n")


@pytest.mark.parametrize("scope", SCOPES)
def test_every_registry_name_is_documented(scope: Scope) -> None:
    text = _doc(scope)
    names = [o.name for o in OPTIONS if o.scope in (scope, "both")]
    assert names
    missing = [name for name in names if name not in text]
    assert not missing, f"docs/{scope}.md does not mention {missing}"
