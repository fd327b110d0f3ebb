"""The option tables of the docs are the registry's tables.

``docs/reader.md`` and ``docs/writer.md`` keep a copy of their table between the marker lines
``<!-- options:SCOPE:begin -->`` / ``<!-- options:SCOPE:end -->``, so that the pages read well
on GitHub; regenerate it with ``python -m pyspark_kafka_txn.options.registry reader|writer``.
The docs site does not use that copy: the mkdocs hook ``docs/_hooks/options.py`` puts the
registry's table between the markers at build time. These tests keep the copy current and
check that the hook does its part.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Literal

import pytest

from pyspark_kafka_txn.options.registry import OPTIONS, markdown_table

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOK = DOCS / "_hooks" / "options.py"
Scope = Literal["reader", "writer"]
SCOPES: tuple[Scope, ...] = ("reader", "writer")


def _doc(scope: Scope) -> str:
    return (DOCS / f"{scope}.md").read_text(encoding="utf-8")


def _between_markers(text: str, scope: Scope, where: str) -> str:
    begin = f"<!-- options:{scope}:begin -->"
    end = f"<!-- options:{scope}:end -->"
    assert text.count(begin) == 1, f"{where} needs exactly one {begin!r} line"
    assert text.count(end) == 1, f"{where} needs exactly one {end!r} line"
    start = text.index(begin) + len(begin)
    stop = text.index(end)
    assert start <= stop, f"{where}: {end!r} comes before {begin!r}"
    return text[start:stop]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_options_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scope", SCOPES)
def test_doc_table_is_the_registry_table(scope: Scope) -> None:
    """Regenerate with ``python -m pyspark_kafka_txn.options.registry <scope>``."""
    embedded = _between_markers(_doc(scope), scope, f"docs/{scope}.md")
    assert embedded.strip("\n") == markdown_table(scope).strip("\n")


@pytest.mark.parametrize("scope", SCOPES)
def test_every_registry_name_is_documented(scope: Scope) -> None:
    text = _doc(scope)
    names = [o.name for o in OPTIONS if o.scope in (scope, "both")]
    assert names
    missing = [name for name in names if name not in text]
    assert not missing, f"docs/{scope}.md does not mention {missing}"


def test_the_site_build_runs_the_hook() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs/_hooks/options.py" in config
    assert HOOK.is_file()


@pytest.mark.parametrize("scope", SCOPES)
def test_hook_puts_the_registry_table_on_the_page(scope: Scope) -> None:
    rendered = _hook().render(_doc(scope), f"{scope}.md")
    assert _between_markers(rendered, scope, "the rendered page").strip() == (
        markdown_table(scope).strip()
    )
    # The text around the table is untouched.
    before, _, _ = _doc(scope).partition(f"<!-- options:{scope}:begin -->")
    assert rendered.startswith(before)


def test_hook_replaces_a_stale_copy_and_leaves_other_pages_alone() -> None:
    hook = _hook()
    stale = (
        "# Page\n\n<!-- options:writer:begin -->\n\n| option |\n|---|\n| `gone` |\n\n"
        "<!-- options:writer:end -->\n\nAfter.\n"
    )
    rendered = hook.render(stale)
    assert "`gone`" not in rendered
    assert markdown_table("writer").strip() in rendered
    assert rendered.endswith("<!-- options:writer:end -->\n\nAfter.\n")
    plain = "# No table\n\nText with `<!-- options:reader:begin -->` inline.\n"
    assert hook.render(plain) == plain


@pytest.mark.parametrize(
    ("markdown", "complaint"),
    [
        ("<!-- options:reader:begin -->\n| x |\n", "never closed"),
        ("<!-- options:reader:end -->\n", "without its begin"),
        ("<!-- options:writer:begin -->\n<!-- options:reader:end -->\n", "without its begin"),
        ("<!-- options:readr:begin -->\n<!-- options:readr:end -->\n", "unknown option scope"),
        (
            "<!-- options:reader:begin -->\n<!-- options:writer:begin -->\n",
            "inside the 'reader' region",
        ),
    ],
)
def test_hook_refuses_broken_markers(markdown: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        _hook().render(markdown, "page.md")
