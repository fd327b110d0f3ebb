"""Importing the connector stays cheap where Spark imports it again for every query.

Spark starts a fresh Python process for each streaming query's driver-side reader and
imports the data source there (and in every new executor worker). Modules the reader does
not use must not be imported on that path: kio alone (through ``hypothesis``) costs about
0.3 s per process.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

HEAVY = ("kio", "hypothesis", "pyspark_kafka_txn.embedded", "pyspark_kafka_txn.client.producer")


def imported_after(statement: str) -> set[str]:
    """Top-level and package names imported by ``statement`` in a fresh interpreter."""
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "statement",
    [
        "import pyspark_kafka_txn",
        "import pyspark_kafka_txn.source",
        "from pyspark_kafka_txn import DefaultSource",
        "import pyspark_kafka_txn.reader",
        "import pyspark_kafka_txn.reader.stream",
        "import pyspark_kafka_txn.reader.batch",
        "import pyspark_kafka_txn.reader.executor",
        "import pyspark_kafka_txn.client",
        "from pyspark_kafka_txn.client import ProducerConfig",
    ],
)
def test_reader_path_imports_no_protocol_or_broker_code(statement: str) -> None:
    modules = imported_after(statement)
    loaded = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert loaded == [], f"{statement!r} imported {loaded}"


def test_package_import_does_not_load_pyspark() -> None:
    modules = imported_after("import pyspark_kafka_txn")
    assert "pyspark" not in modules
    assert "pyspark_kafka_txn" in modules


def test_producer_config_imports_no_protocol_numpy_or_arrow() -> None:
    """The driver parses writer options (ProducerConfig) without the protocol code."""
    modules = imported_after("from pyspark_kafka_txn.client.config import ProducerConfig")
    heavy = ("kio", "hypothesis", "numpy", "pyarrow", "pyspark_kafka_txn.client.connection")
    loaded = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy))
    assert loaded == []


@pytest.mark.parametrize(
    ("package", "name", "home"),
    [
        ("client", "TransactionalProducer", "producer"),
        ("client", "end_transactions", "ending"),
        ("reader", "read_range", "executor"),
        ("reader", "KafkaInputPartitions", "common"),
    ],
)
def test_packages_load_their_names_on_first_use(package: str, name: str, home: str) -> None:
    """``client`` and ``reader`` re-export lazily (``_lazy``): same objects, listed, strict."""
    pkg = importlib.import_module(f"pyspark_kafka_txn.{package}")
    module = importlib.import_module(f"pyspark_kafka_txn.{package}.{home}")
    assert getattr(pkg, name) is getattr(module, name)
    assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(
        AttributeError, match=f"'pyspark_kafka_txn.{package}' has no attribute 'nope'"
    ):
        _ = pkg.nope
