"""The minimum Python, PySpark and Kafka versions the docs state are the package's.

One source of truth for each: setup.cfg's ``python_requires`` (Python), the lower bound of
its ``spark`` extra (PySpark) and :data:`pyspark_kafka_txn._version.MINIMUM_KAFKA` (Kafka).
Every page of docs/ and the README is searched for a stated minimum of each ("Python
3.11+", "PySpark 4.0 or later", "needs Spark 4.2 or later", "``pyspark>=4.0``", "Apache
Kafka 3.9.2 or later", ...), and each one found must be the package's. A version a single
feature needs is written without "or later" / "+" (e.g. "since Kafka 3.0"), so that only
the package's minimums read as such.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

from pyspark_kafka_txn._version import MINIMUM_KAFKA

ROOT = Path(__file__).resolve().parents[2]
# The site's pages (mkdocs.yml leaves docs/dev/, the research notes, out) and the README.
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

_VERSION = r"(\d+(?:\.\d+)*)"
_LATER = r"(?:\+|\s+or\s+later|\s+and\s+later|\s+or\s+newer|\s+and\s+newer)"
#: What states a minimum of each, by name: the version is the pattern's one group.
PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    "Python": (
        re.compile(rf"\bPython\s+{_VERSION}{_LATER}"),
        re.compile(rf"python_requires\s*=?\s*>=\s*{_VERSION}"),
    ),
    "PySpark": (
        re.compile(rf"\b(?:Py)?Spark\s+{_VERSION}{_LATER}", re.IGNORECASE),
        re.compile(rf"\bpyspark>={_VERSION}", re.IGNORECASE),
    ),
    "Kafka": (re.compile(rf"\bKafka\s+{_VERSION}{_LATER}"),),
}
#: The pages that must state all three (so that the check is never vacuous).
MUST_STATE = ("README.md", "docs/install.md", "docs/compatibility.md")


def _lower_bound(spec: str, name: str) -> str:
    """The version after ``>=`` in a requirement such as ``pyspark>=4.0``."""
    found = re.search(r">=\s*([\d.]+)", spec)
    assert found, f"{name}: no lower bound in {spec!r}"
    return found.group(1)


def package_minimums() -> dict[str, str]:
    """The oldest Python, PySpark and Kafka of the package's metadata.

    Returns
    -------
    dict[str, str]
        ``{"Python": ..., "PySpark": ..., "Kafka": ...}``.
    """
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg", encoding="utf-8")
    spark = [
        line.strip()
        for line in setup["options.extras_require"]["spark"].splitlines()
        if line.strip().lower().startswith("pyspark")
    ]
    assert len(spark) == 1, f"the spark extra should name pyspark once: {spark}"
    return {
        "Python": _lower_bound(setup["options"]["python_requires"], "python_requires"),
        "PySpark": _lower_bound(spark[0], "the spark extra"),
        "Kafka": MINIMUM_KAFKA,
    }


def stated_minimums(text: str) -> dict[str, list[tuple[int, str]]]:
    """Each minimum version a page states, by what it is of, with its line number.

    Parameters
    ----------
    text
        The Markdown of a page.

    Returns
    -------
    dict[str, list[tuple[int, str]]]
        For ``Python``, ``PySpark`` and ``Kafka``: ``(line, version)`` for each statement.
    """
    found: dict[str, list[tuple[int, str]]] = {name: [] for name in PATTERNS}
    # A statement may wrap ("Python 3.11\nor later"): search the text, count the lines.
    for name, patterns in PATTERNS.items():
        for pattern in patterns:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found[name].append((line, match.group(1)))
    return found


def test_the_patterns_find_what_they_are_for() -> None:
    text = (
        "Python 3.11+ and Java 17+. It needs Spark 4.2 or\nlater; `pyspark>=4.0`.\n"
        "Apache Kafka 3.9.2 or later. Since Kafka 3.0 (ListTransactions).\n"
    )
    assert stated_minimums(text) == {
        "Python": [(1, "3.11")],
        "PySpark": [(1, "4.2"), (2, "4.0")],
        "Kafka": [(3, "3.9.2")],
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_stated_minimum_is_the_packages(page: Path) -> None:
    minimums = package_minimums()
    stated = stated_minimums(page.read_text(encoding="utf-8"))
    wrong = [
        f"{page.relative_to(ROOT)}:{line}: {name} {version}, the package says {minimums[name]}"
        for name, found in stated.items()
        for line, version in found
        if version != minimums[name]
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", MUST_STATE)
def test_the_minimums_are_stated(name: str) -> None:
    stated = stated_minimums((ROOT / name).read_text(encoding="utf-8"))
    missing = [what for what, found in stated.items() if not found]
    assert not missing, f"{name} states no minimum {', '.join(missing)} version"
