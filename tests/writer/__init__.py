"""The writer's tests (``pyspark_kafka_txn.writer``): its task, commit, abort and
lingering-transaction code driven as Spark drives it against the session's cluster, and
real Spark queries (``df.write``, ``writeStream``, crashes and restarts)."""
