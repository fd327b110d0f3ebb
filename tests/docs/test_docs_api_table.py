"""docs/embedded-cluster.md's API table is what the embedded broker serves.

Every row (name, key, advertised versions) must match the dispatch table of a default
cluster, and every served API must have a row: the documentation cannot drift from the
broker without this test failing.
"""

from __future__ import annotations

import re
from pathlib import Path

from pyspark_kafka_txn.embedded.handlers import APIS

DOC = Path(__file__).resolve().parents[2] / "docs" / "embedded-cluster.md"
_ROW = re.compile(r"^\| (?P<name>[A-Za-z]+) \| (?P<key>\d+) \| (?P<low>\d+)(?:-(?P<high>\d+))? \|")


def _documented() -> dict[str, tuple[int, int, int]]:
    text = DOC.read_text()
    table = text[text.index("## What it implements") :]
    table = table[: table.index("\n\n", table.index("| API |"))]
    rows = {}
    for line in table.splitlines():
        match = _ROW.match(line)
        if match:
            low = int(match["low"])
            high = int(match["high"]) if match["high"] else low
            rows[match["name"]] = (int(match["key"]), low, high)
    return rows


def test_the_api_table_matches_the_broker() -> None:
    documented = _documented()
    served = {spec.name: (key, spec.min_version, spec.max_version) for key, spec in APIS.items()}
    assert len(documented) >= 30  # the table was found and read
    assert documented == served
