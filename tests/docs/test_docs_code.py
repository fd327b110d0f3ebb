"""Every ```python block of the docs and the README is valid Python (it compiles).

Lines of IPython magics (``%pip install …``, ``!ls``), which notebooks accept, are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)


def _blocks() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            out.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return out


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[w for w, _ in _blocks()])
def test_python_blocks_compile(where: str, code: str) -> None:
    python = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines()
    )
    try:
        compile(python, where, "exec")
    except SyntaxError as exc:
        pytest.fail(f"{where}: not valid Python: {exc.msg} (block line {exc.lineno})")
