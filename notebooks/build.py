"""Generate the Jupyter notebooks (``.ipynb``) from the Databricks source notebooks (``.py``).

The Databricks ``.py`` files are the one source of truth; the ``.ipynb`` files are derived
from them and committed with the outputs of a real run (on the embedded cluster, so that
readers see what the notebook shows), and a test checks that their cells match what this
script generates. After editing a ``.py`` notebook run::

    python notebooks/build.py --execute  # rewrite the .ipynb files and run them
    python notebooks/build.py --check    # exit 1 if one of them is out of date

The conversion, cell by cell (cells are separated by ``# COMMAND ----------``):

* ``# MAGIC %md`` cells become Markdown cells (without the ``# MAGIC`` prefixes);
* the ``# MAGIC %pip install ...`` cell becomes a code cell holding the command commented
  out (where the notebook runs locally the package is installed already);
* in the parameters cell, everything from the ``# -- Databricks widgets --`` line on is
  left out: the notebook keeps the plain variables;
* every other cell is copied as a code cell.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat import NotebookNode

HERE = Path(__file__).resolve().parent
SOURCES = ("quickstart.py", "exactly_once_pipeline.py")

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
WIDGETS = "# -- Databricks widgets --"


def split_cells(text: str) -> list[str]:
    """The cells of a Databricks source notebook, without blank lines around them."""
    lines = text.splitlines()
    if not lines or lines[0] != HEADER:
        raise ValueError(f"a Databricks source notebook starts with {HEADER!r}")
    cells: list[list[str]] = [[]]
    for line in lines[1:]:
        if line == SEPARATOR:
            cells.append([])
        else:
            cells[-1].append(line)
    return [source for cell in cells if (source := "\n".join(cell).strip("\n"))]


def _unmagic(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line != MAGIC and not line.startswith(MAGIC + " "):
            raise ValueError(f"a magic cell mixes in a line without {MAGIC!r}: {line!r}")
        out.append(line[len(MAGIC) + 1 :])
    return out


def convert_cell(source: str, cell_id: str) -> NotebookNode:
    """One Databricks cell as a Jupyter cell."""
    lines = source.splitlines()
    if lines[0].startswith(MAGIC):
        command, *body = _unmagic(lines)
        if command == "%md":
            return nbformat.v4.new_markdown_cell("\n".join(body), id=cell_id)
        if command.startswith("%pip ") and not body:
            text = f"# Uncomment where the package is not installed yet:\n# {command}"
            return nbformat.v4.new_code_cell(text, id=cell_id)
        raise ValueError(f"unsupported magic cell: {command!r}")
    if WIDGETS in lines:
        lines = lines[: lines.index(WIDGETS)]
    return nbformat.v4.new_code_cell("\n".join(lines).rstrip("\n"), id=cell_id)


def notebook(path: Path) -> NotebookNode:
    """The Jupyter notebook generated from the Databricks source notebook at ``path``."""
    cells = split_cells(path.read_text(encoding="utf-8"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [convert_cell(source, f"cell-{i:02d}") for i, source in enumerate(cells)]
    nb.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    nbformat.validate(nb)
    return nb


def render(path: Path) -> str:
    """The text of the ``.ipynb`` file for the Databricks source notebook at ``path``
    (without outputs)."""
    return nbformat.writes(notebook(path)) + "\n"


def cells_of(text: str) -> list[tuple[str, str]]:
    """Each cell's type and source: what must match, whatever the outputs."""
    return [(c.cell_type, c.source) for c in nbformat.reads(text, as_version=4).cells]


def execute(text: str, timeout_s: int = 600) -> str:
    """The notebook ``text`` after a run in a fresh kernel (cells that fail stop it)."""
    from nbclient import NotebookClient

    nb = nbformat.reads(text, as_version=4)
    NotebookClient(
        nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}
    ).execute()
    for cell in nb.cells:  # Spark's start-up log lines are not what the reader came for
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    parser.add_argument(
        "--execute", action="store_true", help="run each notebook and keep its outputs"
    )
    args = parser.parse_args(argv)
    stale = []
    for name in SOURCES:
        source = HERE / name
        target = source.with_suffix(".ipynb")
        text = render(source)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current is not None and cells_of(current) == cells_of(text) and not args.execute:
            continue
        if args.check:
            stale.append(target.name)
        else:
            target.write_text(execute(text) if args.execute else text, encoding="utf-8")
            print(f"wrote {target.relative_to(HERE.parent)}")
    if stale:
        print(f"out of date (run python notebooks/build.py): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
