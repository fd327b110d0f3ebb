"""A Kerberos (SASL/GSSAPI) write and read in a Spark of its own, for ``test_kerberos_spark.py``.

Usage: python -m tests.jobs.kerberos_job SETTINGS OUT

``SETTINGS`` is a JSON file: ``bootstrap``, ``topic``, ``rows`` (values to write) and
``options`` (the ``kafka.*`` Kerberos options as a ``format("kafka")`` job passes them).
The caller sets ``KRB5_CONFIG`` in this process's environment, which Spark's JVM and its
Python workers inherit, as a user sets it on the driver and the executors. A batch
``df.write`` with those options writes the rows; a batch read with the same options is
attempted. What happened goes to ``OUT/result.json``: the write's error (None when it
committed) and the read's error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.jobs.common import child_session


def main(settings_path: str, out: str) -> None:
    settings = json.loads(Path(settings_path).read_text())
    spark = child_session("kafka_txn-kerberos")
    common = {"kafka.bootstrap.servers": settings["bootstrap"], **settings["options"]}
    result: dict[str, str | None] = {}
    df = spark.createDataFrame([(v,) for v in settings["rows"]], "value string")
    try:
        writer = df.write.format("kafka_txn").mode("append").options(**common)
        writer.option("topic", settings["topic"]).save()
        result["write"] = None
    except Exception as exc:  # noqa: BLE001 - recorded for the test
        result["write"] = str(exc)
    try:
        reader = spark.read.format("kafka_txn").options(**common)
        reader.option("subscribe", settings["topic"]).load().collect()
        result["read"] = None
    except Exception as exc:  # noqa: BLE001 - recorded for the test
        result["read"] = str(exc)
    Path(out, "result.json").write_text(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
