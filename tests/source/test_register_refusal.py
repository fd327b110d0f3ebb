"""``register()`` against Spark 4.0's refusal, without a Spark: what it swallows and what not.

Spark 4.0's ``DataSourceManager.registerDataSource`` throws ``DATA_SOURCE_ALREADY_EXISTS``
when the name belongs to a source Spark discovered itself (``pyspark_*`` modules exposing
``DefaultSource``); Spark 4.1 replaces it instead (SPARK-51919). The session here stands in
for a 4.0 session: ``tests/source/test_register.py`` runs the real one.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import AnalysisException

import pyspark_kafka_txn


class _Refusal(AnalysisException):
    """An AnalysisException with a chosen condition, as Spark converts the JVM's."""

    def __init__(self, condition: str) -> None:
        super().__init__(message=f"[{condition}] refused")
        self._condition = condition

    def getCondition(self) -> str:  # noqa: N802 (PySpark's name)
        return self._condition


class _Registry:
    def __init__(self, refusal: str | None) -> None:
        self.refusal = refusal
        self.calls: list[Any] = []

    def register(self, data_source: Any) -> None:
        self.calls.append(data_source)
        if self.refusal is not None:
            raise _Refusal(self.refusal)


class _Session:
    def __init__(self, refusal: str | None = None) -> None:
        self.dataSource = _Registry(refusal)


def test_spark_40_refusal_of_a_discovered_source_means_already_registered() -> None:
    session = _Session(refusal="DATA_SOURCE_ALREADY_EXISTS")
    assert pyspark_kafka_txn.register(session) is False
    assert pyspark_kafka_txn.register(session) is False
    # The second call did not ask Spark again.
    assert session.dataSource.calls == [pyspark_kafka_txn.KafkaTxnDataSource]


def test_registers_once_per_session() -> None:
    session, other = _Session(), _Session()
    assert pyspark_kafka_txn.register(session) is True
    assert pyspark_kafka_txn.register(session) is False
    assert pyspark_kafka_txn.register(other) is True
    assert len(session.dataSource.calls) == len(other.dataSource.calls) == 1


def test_other_refusals_are_raised() -> None:
    session = _Session(refusal="SOME_OTHER_CONDITION")
    with pytest.raises(AnalysisException, match="SOME_OTHER_CONDITION"):
        pyspark_kafka_txn.register(session)
    with pytest.raises(AnalysisException):  # not remembered as registered
        pyspark_kafka_txn.register(session)
