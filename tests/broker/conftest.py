"""Fixtures shared by the broker conformance tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.java_client import JavaClient
from tests.support.target import KafkaTarget


@pytest.fixture(scope="module")
def java(kafka: KafkaTarget) -> Iterator[JavaClient]:
    """One JVM running the Java client harness for a whole test module."""
    client = JavaClient(kafka.bootstrap_servers)
    try:
        yield client
    finally:
        client.close()
