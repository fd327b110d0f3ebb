# Databricks notebook source
# MAGIC %md
# MAGIC # pyspark-kafka-txn: an exactly-once Kafka → Spark → Kafka pipeline
# MAGIC
# MAGIC 1. An independent transactional producer fills an input topic with keyed JSON orders:
# MAGIC    two committed transactions and one aborted in between.
# MAGIC 2. `spark.readStream.format("kafka_txn")` reads it (`read_committed`: the aborted
# MAGIC    orders never reach Spark), a transform parses the JSON and computes each order's
# MAGIC    total, and `df.writeStream.format("kafka_txn")` writes the result to an output topic.
# MAGIC    The writer commits each micro-batch exactly once: every task writes in a Kafka
# MAGIC    transaction it leaves open, the driver records its decision in Kafka and then commits
# MAGIC    them all. A crash or retry anywhere neither loses nor repeats a row.
# MAGIC 3. An independent `read_committed` consumer checks the output: every committed order
# MAGIC    exactly once, nothing of the aborted transaction.
# MAGIC
# MAGIC **Where it runs**
# MAGIC
# MAGIC * **Locally** (a plain `python exactly_once_pipeline.py`, or the `.ipynb` in Jupyter):
# MAGIC   with an empty `bootstrap_servers` it starts an embedded Kafka-compatible cluster in
# MAGIC   this process and a `local[2]` SparkSession.
# MAGIC * **Databricks**: the package runs on the Python data source API of PySpark 4.0 and
# MAGIC   later, by feature detection (see the Compatibility page: what differs per version).
# MAGIC   Serverless compute accepts only `trigger(availableNow=True)` for streaming queries;
# MAGIC   this notebook uses nothing else. The embedded cluster lives on the driver (it
# MAGIC   listens on its loopback address): only a single-node cluster reaches it, so on any
# MAGIC   other cluster set `bootstrap_servers` to your Kafka (the notebook stops at once
# MAGIC   otherwise).
# MAGIC * **Installing**: the package must be installed where the Python code of Spark runs.
# MAGIC   On Databricks: put the wheel on a Unity Catalog volume, set its path in the next
# MAGIC   cell, run it and the one after (`restartPython`), or install the wheel as a cluster
# MAGIC   library or serverless environment dependency and skip both (see the Install page).
# MAGIC   With Spark Connect the data source runs on the server: install it there too.

# COMMAND ----------

# MAGIC %pip install /Volumes/main/default/wheels/pyspark_kafka_txn-0.1.0.dev0-py3-none-any.whl

# COMMAND ----------

if "dbutils" in globals():  # Databricks, after %pip: load the package just installed
    dbutils.library.restartPython()  # noqa: F821 - a Databricks notebook global

# COMMAND ----------

import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pyspark_kafka_txn import register
from pyspark_kafka_txn.embedded import EmbeddedKafka

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC On Databricks they are widgets at the top of the notebook. `secrets_scope` names a
# MAGIC Databricks secrets scope holding the keys `kafka-username` and `kafka-password`: with a
# MAGIC scope, Kafka is reached with SASL (`PLAIN` unless you change `SASL_MECHANISM`) over TLS.
# MAGIC The credentials are read with `dbutils.secrets.get` and never printed. The checkpoint
# MAGIC is kept per pair of topics: running the notebook again with the same `checkpoint_dir`
# MAGIC continues the query where it stopped, so only the new orders are written.

# COMMAND ----------

# Parameters (on Databricks: the widgets at the top of the notebook)
BOOTSTRAP_SERVERS = ""  # empty: start an embedded Kafka cluster in this process
INPUT_TOPIC = "kafka-txn-orders"
OUTPUT_TOPIC = "kafka-txn-orders-priced"
SECRETS_SCOPE = ""  # a Databricks secrets scope with kafka-username / kafka-password
CHECKPOINT_DIR = ""  # empty: a temporary directory (on Databricks: a volume path)
SASL_MECHANISM = "PLAIN"  # or SCRAM-SHA-256 / SCRAM-SHA-512

# -- Databricks widgets --
dbutils = globals().get("dbutils")  # defined in Databricks notebooks only
if dbutils is not None:
    dbutils.widgets.text("bootstrap_servers", BOOTSTRAP_SERVERS, "Kafka bootstrap servers")
    dbutils.widgets.text("input_topic", INPUT_TOPIC, "Input topic")
    dbutils.widgets.text("output_topic", OUTPUT_TOPIC, "Output topic")
    dbutils.widgets.text("secrets_scope", SECRETS_SCOPE, "Secrets scope (SASL)")
    dbutils.widgets.text("checkpoint_dir", CHECKPOINT_DIR, "Checkpoint directory")
    BOOTSTRAP_SERVERS = dbutils.widgets.get("bootstrap_servers").strip()
    INPUT_TOPIC = dbutils.widgets.get("input_topic").strip()
    OUTPUT_TOPIC = dbutils.widgets.get("output_topic").strip()
    SECRETS_SCOPE = dbutils.widgets.get("secrets_scope").strip()
    CHECKPOINT_DIR = dbutils.widgets.get("checkpoint_dir").strip()

# COMMAND ----------

# MAGIC %md
# MAGIC ## Spark and Kafka
# MAGIC
# MAGIC On Databricks `spark` exists already; anywhere else a local SparkSession is created.
# MAGIC Registering `kafka_txn` explicitly works everywhere (installing the package is enough
# MAGIC where Spark discovers data sources in modules named `pyspark_*`).

# COMMAND ----------

spark = globals().get("spark")
OWN_SPARK = spark is None
if OWN_SPARK:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafka_txn exactly-once pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
register(spark)  # idempotent; needed after %pip into a running cluster

embedded = None
if not BOOTSTRAP_SERVERS:
    # The embedded cluster listens on this driver's loopback address: only tasks running on
    # this machine (a local master: a laptop, a single-node cluster) can reach it.
    try:
        MASTER = spark.conf.get("spark.master")
    except Exception:  # noqa: BLE001 - e.g. serverless compute hides it
        MASTER = "(unknown)"
    if not MASTER.startswith("local"):
        raise RuntimeError(
            f"No bootstrap_servers given, and this Spark is not local (master {MASTER}): "
            "the embedded Kafka cluster would run on the driver, where the executors cannot "
            "reach it, and every task would time out. Set bootstrap_servers to your Kafka."
        )
    embedded = EmbeddedKafka().start()
    BOOTSTRAP_SERVERS = embedded.bootstrap_servers

security = {}  # librdkafka settings; the Spark options are the same with a "kafka." prefix
if SECRETS_SCOPE:
    dbutils = globals().get("dbutils")
    if dbutils is None:
        raise RuntimeError("secrets_scope needs Databricks (dbutils.secrets); leave it empty")
    security = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SASL_MECHANISM,
        "sasl.username": dbutils.secrets.get(SECRETS_SCOPE, "kafka-username"),
        "sasl.password": dbutils.secrets.get(SECRETS_SCOPE, "kafka-password"),
    }
kafka_conf = {"bootstrap.servers": BOOTSTRAP_SERVERS, **security}
spark_kafka = {f"kafka.{k}": v for k, v in kafka_conf.items()}

PARTITIONS = {INPUT_TOPIC: 2, OUTPUT_TOPIC: 3}
admin = AdminClient(kafka_conf)
for future in admin.create_topics([NewTopic(t, n) for t, n in PARTITIONS.items()]).values():
    try:
        future.result(30)
    except KafkaException as e:
        if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise
del admin  # closes its connections
checkpoints = CHECKPOINT_DIR or tempfile.mkdtemp(prefix="kafka-txn-pipeline-")
# The orders of this run carry RUN: on topics that earlier runs wrote to too, the check
# at the end looks at this run's orders.
RUN = uuid.uuid4().hex[:8]
auth = "SASL, scope " + SECRETS_SCOPE if SECRETS_SCOPE else "no authentication"
print(f"Kafka: {'embedded ' if embedded else ''}{BOOTSTRAP_SERVERS} ({auth}); run {RUN}")


def show(df):
    """`display` on Databricks, `show` anywhere else."""
    databricks_display = globals().get("display")
    if databricks_display is not None:
        databricks_display(df)
    else:
        df.show(truncate=False)


# COMMAND ----------

# MAGIC %md
# MAGIC ## The input: an independent transactional producer
# MAGIC
# MAGIC Orders are keyed by customer, so a customer's orders stay in one partition, in order.
# MAGIC Orders 0 to 39 and 60 to 99 are committed (two transactions); orders 40 to 59 are written
# MAGIC and then aborted. The aborted records are in the input topic's log, followed by an abort
# MAGIC marker.

# COMMAND ----------


def order(n):
    return {
        "run": RUN,
        "order_id": n,
        "customer": f"customer-{n % 7}",
        "quantity": 1 + n % 4,
        "unit_price": 2.5 + (n % 10) * 1.25,
    }


producer = Producer({**kafka_conf, "transactional.id": f"kafka-txn-orders-{RUN}"})
producer.init_transactions(30)
outcomes = {"commit": [], "abort": []}
for orders, outcome in (
    (range(40), "commit"),
    (range(40, 60), "abort"),
    (range(60, 100), "commit"),
):
    producer.begin_transaction()
    for n in orders:
        record = order(n)
        producer.produce(INPUT_TOPIC, key=record["customer"], value=json.dumps(record))
    producer.flush(30)
    if outcome == "commit":
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    outcomes[outcome].extend(orders)
del producer  # closes its connections
committed_ids, aborted_ids = set(outcomes["commit"]), set(outcomes["abort"])
print(f"input: {len(committed_ids)} orders committed, {len(aborted_ids)} aborted")

# COMMAND ----------

# MAGIC %md
# MAGIC ## The streaming query
# MAGIC
# MAGIC Read with `kafka_txn` (read_committed by default), parse the JSON value with
# MAGIC `from_json`, compute `total`, serialise it again with `to_json`, and write with
# MAGIC `kafka_txn` (exactly-once by default). `maxOffsetsPerTrigger` splits the input into a
# MAGIC few micro-batches; `trigger(availableNow=True)` processes what is there and stops.

# COMMAND ----------

ORDER_SCHEMA = "run STRING, order_id INT, customer STRING, quantity INT, unit_price DOUBLE"

orders_in = (
    spark.readStream.format("kafka_txn")
    .options(**spark_kafka)
    .option("subscribe", INPUT_TOPIC)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", 60)
    .load()
)
priced = (
    orders_in.select("key", F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
    .select("key", "o.*")
    .withColumn("total", F.round(F.col("quantity") * F.col("unit_price"), 2))
    .select("key", F.to_json(F.struct("run", "order_id", "customer", "total")).alias("value"))
)
query = (
    priced.writeStream.format("kafka_txn")
    .options(**spark_kafka)
    .option("topic", OUTPUT_TOPIC)
    .option("checkpointLocation", os.path.join(checkpoints, f"{INPUT_TOPIC}-to-{OUTPUT_TOPIC}"))
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
if query.exception() is not None:
    raise RuntimeError(f"the query failed: {query.exception()}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Progress
# MAGIC
# MAGIC One row per micro-batch: its input rows, and how long Spark spent in `addBatch` (the
# MAGIC tasks writing their transactions plus the driver's commit) and in the whole trigger.

# COMMAND ----------

progress = [
    (
        p["batchId"],
        p["numInputRows"],
        p["durationMs"].get("addBatch"),
        p["durationMs"].get("triggerExecution"),
    )
    for p in query.recentProgress
]
show(spark.createDataFrame(progress, "batch LONG, rows LONG, addBatch_ms LONG, trigger_ms LONG"))
batches = sum(1 for _, rows, _, _ in progress if rows > 0)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Verify with an independent read_committed consumer
# MAGIC
# MAGIC A plain confluent-kafka consumer with `isolation.level=read_committed` reads the output
# MAGIC topic to its end. Every committed order must be there exactly once, with the right
# MAGIC total; no order of the aborted transaction may be there.

# COMMAND ----------


def read_committed(topic, timeout_s=120):
    """Every record of ``topic`` a read_committed consumer sees, up to the end."""
    consumer = Consumer(
        {
            **kafka_conf,
            "group.id": f"kafka-txn-verify-{RUN}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    records, at_end = [], set()
    deadline = time.monotonic() + timeout_s
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: only partitions {sorted(at_end)} read to the end")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            records.append(msg)
    finally:
        consumer.close()
    return records


output = [json.loads(m.value()) for m in read_committed(OUTPUT_TOPIC)]
seen = Counter(o["order_id"] for o in output if o.get("run") == RUN)
expected_totals = {
    n: round(order(n)["quantity"] * order(n)["unit_price"], 2) for n in committed_ids
}
wrong_totals = [
    o for o in output if o.get("run") == RUN and o["total"] != expected_totals.get(o["order_id"])
]
missing = committed_ids - set(seen)
twice = sorted(n for n, count in seen.items() if count > 1)
aborted_out = aborted_ids & set(seen)
print(
    f"pipeline: committed_in={len(committed_ids)} aborted_in={len(aborted_ids)} "
    f"out={sum(seen.values())} missing={len(missing)} duplicates={len(twice)} "
    f"aborted_out={len(aborted_out)} wrong_totals={len(wrong_totals)} batches={batches}"
)
assert not missing and not twice and not aborted_out and not wrong_totals
assert sum(seen.values()) == len(committed_ids) == 80

# COMMAND ----------

# MAGIC %md
# MAGIC ## Clean up
# MAGIC
# MAGIC Stops what this notebook started: the local SparkSession and the embedded cluster.

# COMMAND ----------

if OWN_SPARK:
    spark.stop()
if embedded is not None:
    embedded.stop()
