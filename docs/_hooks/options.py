"""mkdocs hook: option tables straight from the registry.

``docs/reader.md`` and ``docs/writer.md`` hold their option table between two marker lines,
``<!-- options:SCOPE:begin -->`` and ``<!-- options:SCOPE:end -->`` (SCOPE is ``reader`` or
``writer``). The copy between the markers keeps the page readable on GitHub, and
``tests/docs/test_option_docs.py`` keeps it equal to the registry. On the site this hook
replaces it with :func:`pyspark_kafka_txn.options.registry.markdown_table` at build time,
so the published table is the registry's even if the copy were stale.

Configured in ``mkdocs.yml`` under ``hooks:``; this directory is excluded from the site.
"""

from __future__ import annotations

import re
from typing import Literal

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from pyspark_kafka_txn.options.registry import markdown_table

Scope = Literal["reader", "writer"]
SCOPES: tuple[Scope, ...] = ("reader", "writer")

#: A marker line: ``<!-- options:reader:begin -->``; the scope is matched loosely so that a
#: misspelt one fails the build instead of passing through unnoticed.
MARKER = re.compile(r"^<!--\s*options:(?P<scope>[^:\s]*):(?P<edge>begin|end)\s*-->[ \t]*$", re.M)


def render(markdown: str, where: str = "<page>") -> str:
    """Replace every marked region of ``markdown`` with the registry's table.

    Raises
    ------
    ValueError
        A marker names an unknown scope, or begin and end markers do not pair up.
    """
    out: list[str] = []
    pos = 0
    open_scope: str | None = None
    for match in MARKER.finditer(markdown):
        scope, edge = match["scope"], match["edge"]
        if scope not in SCOPES:
            raise ValueError(f"{where}: unknown option scope {scope!r} in {match[0]!r}")
        if edge == "begin":
            if open_scope is not None:
                raise ValueError(f"{where}: {match[0]!r} inside the {open_scope!r} region")
            out.append(markdown[pos : match.end()])
            open_scope = scope
        else:
            if open_scope != scope:
                raise ValueError(f"{where}: {match[0]!r} without its begin marker")
            out.append("\n\n" + markdown_table(scope) + "\n")
            out.append(match[0])
            open_scope = None
        pos = match.end()
    if open_scope is not None:
        raise ValueError(f"{where}: the {open_scope!r} option region is never closed")
    out.append(markdown[pos:])
    return "".join(out)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """mkdocs event: runs on each page's Markdown before it is converted."""
    where = page.file.src_uri
    try:
        return render(markdown, where)
    except ValueError as exc:
        raise PluginError(str(exc)) from None
