"""A Kafka → kafka_txn → kafka_txn query run in its own process (killed by the tests).

Usage: python -m tests.jobs.writer_job BOOTSTRAP SOURCE SINK CHECKPOINT PREFIX PARTITIONS
[NAME=VALUE ...] (more writer options, e.g. deliveryGuarantee=at_least_once)
The query repartitions its input into PARTITIONS Spark partitions (round robin), so a
restart with another number distributes the rows differently, then runs availableNow.
"""

from __future__ import annotations

import sys

from tests.jobs.common import child_session, kafka_txn_stream, run_to_end


def main(argv: list[str]) -> int:
    bootstrap, source, sink, checkpoint, prefix, partitions = argv[:6]
    extra = dict(arg.split("=", 1) for arg in argv[6:])
    spark = child_session("kafka_txn-writer-job")
    query = (
        kafka_txn_stream(spark, bootstrap, source)
        .load()
        .select("key", "value")
        .repartition(int(partitions))
        .writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("transactionalIdPrefix", prefix)
        .option("checkpointLocation", checkpoint)
        .options(**extra)
        .trigger(availableNow=True)
        .start()
    )
    return run_to_end(spark, query)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
