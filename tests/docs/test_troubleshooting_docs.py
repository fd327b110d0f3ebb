"""docs/troubleshooting.md covers every exception class a user can meet."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pyspark_kafka_txn.errors as errors
from pyspark_kafka_txn.errors import TransactionNotAbortedError

PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def _classes() -> set[str]:
    names = {
        name
        for name in errors.__all__
        if inspect.isclass(getattr(errors, name))
        and issubclass(getattr(errors, name), errors.KafkaTxnError)
    }
    return names | {TransactionNotAbortedError.__name__}


def test_every_exception_class_has_a_section() -> None:
    headings = re.findall(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), re.M)
    covered = {name for heading in headings for name in re.findall(r"`(\w+)`", heading)}
    missing = _classes() - covered - {"KafkaTxnError"}  # the root: the page's introduction
    assert not missing, f"docs/troubleshooting.md has no section for {sorted(missing)}"


def test_the_tree_on_the_page_names_every_class() -> None:
    text = PAGE.read_text(encoding="utf-8")
    tree = text[text.index("```") : text.index("```", text.index("```") + 3)]
    assert _classes() <= set(re.findall(r"\w+", tree))
