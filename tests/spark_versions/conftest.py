"""The smoke suite runs only when ``KAFKA_TXN_SPARK_VERSIONS`` names release lines
(``make spark-versions``, part of ``make test``); otherwise its tests are deselected."""

from __future__ import annotations

import os

import pytest

VERSIONS = os.environ.get("KAFKA_TXN_SPARK_VERSIONS", "").split()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if VERSIONS:
        return
    here = [i for i in items if i.nodeid.startswith("tests/spark_versions/")]
    if here:
        config.hook.pytest_deselected(items=here)
        items[:] = [i for i in items if i not in here]
