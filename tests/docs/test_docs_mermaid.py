"""The docs site serves its own mermaid.js: pages with a diagram load it in <head>."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, cast

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_mermaid_hook", ROOT / "docs/_hooks/mermaid.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pages_with_a_diagram_load_the_sites_own_mermaid_first() -> None:
    hook = _hook()
    page = cast("Any", SimpleNamespace(url="design/"))
    html = '<head><title>x</title></head><body><pre class="mermaid">a</pre><script src="b.js">'
    out = hook.on_post_page(html, page, None)
    assert '<script src="../js/mermaid.min.js"></script></head>' in out
    assert out.index("mermaid.min.js") < out.index("b.js")
    assert "unpkg" not in out and "cdn" not in out
    plain = "<head></head><body>no diagram</body>"
    assert hook.on_post_page(plain, page, None) == plain


def test_the_site_build_runs_the_hook() -> None:
    assert "docs/_hooks/mermaid.py" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_mermaid_is_cached_where_the_tests_keep_kafkas_jars(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.support.maven import cache_root

    hook = _hook()
    for explicit, xdg in ((None, None), (None, tmp_path / "xdg"), (tmp_path / "own", tmp_path)):
        for name, value in (("KAFKA_TXN_CACHE", explicit), ("XDG_CACHE_HOME", xdg)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, str(value))
        assert hook._cache().parents[2] == cache_root()
