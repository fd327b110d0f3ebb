"""What the packaging tests and the PySpark-versions smoke suite share: running a command
with its output in the failure message, and a copy of the package's build inputs (so that
a build leaves no ``build/`` or egg-info in the working tree)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: What ``python -m build`` / ``pip wheel`` read from the repository (MANIFEST.in puts the
#: Markdown files README.md points to into the source distribution).
BUILD_INPUTS = (
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "LICENSE",
    "CHANGELOG.md",
    "src",
    "docs",
    "bench/README.md",
    "tests/README.md",
)


def run(*args: str | Path, timeout: float = 600, **kwargs: Any) -> str:
    """Run a command and return its stdout; on failure show its output (the assertion
    message). ``kwargs`` go to :func:`subprocess.run` (``cwd``, ``env``)."""
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kwargs
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    out: str = done.stdout
    return out


def copy_build_inputs(target: Path) -> Path:
    """Copy the build inputs (:data:`BUILD_INPUTS`) into ``target``; return it."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, target / name, ignore=ignore)
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / name)
    return target
