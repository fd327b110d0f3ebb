"""The writer's options for tests that drive the writer without Spark (``tests/writer``)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from pyspark_kafka_txn.options import parse_writer_options
from pyspark_kafka_txn.options.writer import WriterOptions


def fresh_prefix(label: str) -> str:
    """A ``transactionalIdPrefix`` no other test uses: ``{label}-{8 hex digits}-``."""
    return f"{label}-{uuid.uuid4().hex[:8]}-"


def writer_options(
    bootstrap: str, topic: str, prefix: str, extra: Mapping[str, str] | None = None
) -> WriterOptions:
    """Parsed writer options for ``topic`` under ``prefix``, with ``extra`` options (by
    their user-facing names, e.g. ``kafka.transaction.timeout.ms``) on top."""
    return parse_writer_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic,
            "transactionalIdPrefix": prefix,
            **(extra or {}),
        }
    )
