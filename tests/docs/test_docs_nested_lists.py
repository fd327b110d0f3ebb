"""A list item indented under another one renders nested on the site.

The site's Markdown (Python-Markdown, through mkdocs) nests a list item only when it is
indented by four spaces more than its parent's marker; an item indented by one to three
spaces renders as a sibling of its parent (under a numbered step it becomes the next
numbers). Each page of docs/ is rendered with the Markdown extensions of mkdocs.yml, and
every item its source indents under another item must be inside that item in the HTML.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import markdown
import pytest
from mkdocs.config import load_config

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))

_ITEM = re.compile(r"^( *)(?:[-*+]|\d+[.)]) +(\S.*)$")
_FENCE = re.compile(r"^ *(`{3,}|~{3,})")
_WORD = re.compile(r"[a-z0-9]+")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")


def markdown_extensions() -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The Markdown extensions of the site and their settings, as mkdocs passes them on.

    Read with mkdocs' own loader, so they are mkdocs.yml's plus mkdocs' defaults (``toc``,
    ``tables``, ``fenced_code``).

    Returns
    -------
    tuple[list[str], dict[str, dict[str, Any]]]
        The extension names and, by name, the settings of those that have any.
    """
    config = load_config(config_file=str(ROOT / "mkdocs.yml"))
    return list(config.markdown_extensions), dict(config.mdx_configs)


def _words(text: str, count: int = 6) -> tuple[str, ...]:
    return tuple(_WORD.findall(_LINK_TARGET.sub("]", text).lower())[:count])


def nested_in_source(text: str) -> list[tuple[int, tuple[str, ...]]]:
    """The list items a page's source indents under another item, outside code blocks.

    Parameters
    ----------
    text
        The Markdown of a page.

    Returns
    -------
    list[tuple[int, tuple[str, ...]]]
        For each such item, its line number and its first words.
    """
    found: list[tuple[int, tuple[str, ...]]] = []
    fence: str | None = None
    open_items: list[int] = []  # marker indents of the items of the list the line is in
    blank = False
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1).startswith(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)[:3]
            continue
        if not line.strip():
            blank = True
            continue
        item = _ITEM.match(line)
        if item:
            indent = len(item.group(1))
            open_items = [i for i in open_items if i < indent]
            if open_items:
                found.append((number, _words(item.group(2))))
            open_items.append(indent)
        elif not line.startswith(" ") and (blank or line.startswith(("#", "|", "<"))):
            open_items = []  # a paragraph, heading, table or HTML block ends the list
        blank = False
    return found


class _ItemTexts(HTMLParser):
    """The text of each ``<li>`` of a page, without its nested lists, and its nesting."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[tuple[int, list[str]]] = []  # (li depth, text parts)
        self._open: list[int] = []  # indices into items of the open <li> elements
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "li":
            self.items.append((len(self._open) + 1, []))
            self._open.append(len(self.items) - 1)
        elif tag == "pre":
            self._code += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "li" and self._open:
            self._open.pop()
        elif tag == "pre":
            self._code -= 1

    def handle_data(self, data: str) -> None:
        if self._open and not self._code:
            self.items[self._open[-1]][1].append(data)


def nested_in_html(html: str) -> set[tuple[str, ...]]:
    """The first words of each ``<li>`` that is inside another ``<li>``."""
    parser = _ItemTexts()
    parser.feed(html)
    return {_words(" ".join(parts)) for depth, parts in parser.items if depth > 1}


def flattened(text: str) -> list[str]:
    """The items a page's source nests that its rendering does not, as ``line: words``."""
    names, settings = markdown_extensions()
    html = markdown.Markdown(extensions=names, extension_configs=settings).convert(text)
    rendered = nested_in_html(html)
    return [
        f"line {line}: {' '.join(words)}"
        for line, words in nested_in_source(text)
        if not any(words[: len(r)] == r[: len(words)] for r in rendered if r and words)
    ]


def test_three_spaces_render_flat_and_four_nested() -> None:
    three = "1. Step one:\n   * first case\n   * second case\n2. Step two.\n"
    four = "1. Step one:\n    * first case\n    * second case\n2. Step two.\n"
    assert flattened(three) == ["line 2: first case", "line 3: second case"]
    assert flattened(four) == []


def test_code_blocks_are_not_lists() -> None:
    text = "* item\n\n    ```python\n     - not an item\n    ```\n"
    assert nested_in_source(text) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_nested_items_render_nested(page: Path) -> None:
    flat = flattened(page.read_text(encoding="utf-8"))
    assert not flat, (
        f"{page.name}: list items indented under another item render as its siblings "
        "(indent them 4 spaces past the parent's marker):\n" + "\n".join(flat)
    )
