# Databricks notebook source
# MAGIC %md
# MAGIC # pyspark-kafka-txn: quickstart
# MAGIC
# MAGIC `format("kafka_txn")` reads Kafka topics like Spark's built-in `format("kafka")`, but it
# MAGIC honours Kafka transactions: by default it reads with `read_committed`, so records of
# MAGIC aborted transactions never reach Spark and micro-batches stop at the Last Stable Offset.
# MAGIC
# MAGIC This notebook writes two transactions with confluent-kafka, one committed and one
# MAGIC aborted, then reads the topic three ways: a batch read (`read_committed`, the default),
# MAGIC a batch read with `kafka.isolation.level=read_uncommitted`, and a streaming read with
# MAGIC `trigger(availableNow=True)`.
# MAGIC
# MAGIC **Where it runs**
# MAGIC
# MAGIC * **Locally** (a plain `python quickstart.py`, or the `.ipynb` in Jupyter): with an empty
# MAGIC   `bootstrap_servers` it starts an embedded Kafka-compatible cluster in this process
# MAGIC   and a `local[2]` SparkSession.
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

import os
import sys
import tempfile
import uuid

from confluent_kafka import KafkaException, Producer
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
# MAGIC The credentials are read with `dbutils.secrets.get` and never printed.

# COMMAND ----------

# Parameters (on Databricks: the widgets at the top of the notebook)
BOOTSTRAP_SERVERS = ""  # empty: start an embedded Kafka cluster in this process
TOPIC = "kafka-txn-quickstart"
SECRETS_SCOPE = ""  # a Databricks secrets scope with kafka-username / kafka-password
CHECKPOINT_DIR = ""  # empty: a temporary directory (on Databricks: a volume path)
SASL_MECHANISM = "PLAIN"  # or SCRAM-SHA-256 / SCRAM-SHA-512

# -- Databricks widgets --
dbutils = globals().get("dbutils")  # defined in Databricks notebooks only
if dbutils is not None:
    dbutils.widgets.text("bootstrap_servers", BOOTSTRAP_SERVERS, "Kafka bootstrap servers")
    dbutils.widgets.text("topic", TOPIC, "Topic")
    dbutils.widgets.text("secrets_scope", SECRETS_SCOPE, "Secrets scope (SASL)")
    dbutils.widgets.text("checkpoint_dir", CHECKPOINT_DIR, "Checkpoint directory")
    BOOTSTRAP_SERVERS = dbutils.widgets.get("bootstrap_servers").strip()
    TOPIC = dbutils.widgets.get("topic").strip()
    SECRETS_SCOPE = dbutils.widgets.get("secrets_scope").strip()
    CHECKPOINT_DIR = dbutils.widgets.get("checkpoint_dir").strip()

# COMMAND ----------

# MAGIC %md
# MAGIC ## Spark and Kafka
# MAGIC
# MAGIC On Databricks `spark` exists already; anywhere else a local SparkSession is created.
# MAGIC Installing the package registers `kafka_txn` (Spark discovers modules named
# MAGIC `pyspark_*`); registering it explicitly, as here, works everywhere.

# COMMAND ----------

spark = globals().get("spark")
OWN_SPARK = spark is None
if OWN_SPARK:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafka_txn quickstart")
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

admin = AdminClient(kafka_conf)
try:
    admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].result(30)
except KafkaException as e:
    if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
        raise
del admin  # closes its connections
checkpoints = CHECKPOINT_DIR or tempfile.mkdtemp(prefix="kafka-txn-quickstart-")
# Records of this run carry RUN in their key: on a topic that earlier runs wrote to too,
# the counts below are of this run's records.
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
# MAGIC ## Two transactions: one committed, one aborted
# MAGIC
# MAGIC An ordinary transactional producer (confluent-kafka) writes 5 records and commits,
# MAGIC then writes 3 more and aborts. The aborted records stay in the log, with an abort
# MAGIC marker after them; `read_committed` consumers skip them.

# COMMAND ----------

producer = Producer({**kafka_conf, "transactional.id": f"kafka-txn-quickstart-{RUN}"})
producer.init_transactions(30)
producer.begin_transaction()
for i in range(5):
    producer.produce(TOPIC, key=f"{RUN}-{i}", value=f"committed-{i}")
producer.commit_transaction(30)

producer.begin_transaction()
for i in range(5, 8):
    producer.produce(TOPIC, key=f"{RUN}-{i}", value=f"aborted-{i}")
producer.flush(30)  # the records reach the log before the abort
producer.abort_transaction(30)
del producer  # closes its connections

# COMMAND ----------

# MAGIC %md
# MAGIC ## Batch reads
# MAGIC
# MAGIC `read_committed` is the default: only the committed transaction's 5 records.
# MAGIC With `kafka.isolation.level=read_uncommitted` all 8 come back, as with `format("kafka")`.


# COMMAND ----------


def read_topic(isolation_level):
    return (
        spark.read.format("kafka_txn")
        .options(**spark_kafka)
        .option("subscribe", TOPIC)
        .option("kafka.isolation.level", isolation_level)
        .load()
        .where(F.col("key").cast("string").startswith(RUN))
        .selectExpr("CAST(key AS STRING) key", "CAST(value AS STRING) value", "partition", "offset")
    )


committed = read_topic("read_committed")
show(committed.orderBy("key"))
uncommitted = read_topic("read_uncommitted")
show(uncommitted.orderBy("key"))
n_committed, n_uncommitted = committed.count(), uncommitted.count()

# COMMAND ----------

# MAGIC %md
# MAGIC ## A streaming read
# MAGIC
# MAGIC `spark.readStream.format("kafka_txn")` with `trigger(availableNow=True)`: the query
# MAGIC reads everything stable when it starts, in one or more micro-batches, and stops. Its
# MAGIC checkpoint remembers the offsets, so running it again reads only what came since.

# COMMAND ----------

table = os.path.join(checkpoints, f"quickstart-{TOPIC}-table")
query = (
    spark.readStream.format("kafka_txn")
    .options(**spark_kafka)
    .option("subscribe", TOPIC)
    .option("startingOffsets", "earliest")
    .load()
    .selectExpr("CAST(key AS STRING) key", "CAST(value AS STRING) value", "partition", "offset")
    .writeStream.format("parquet")
    .option("path", table)
    .option("checkpointLocation", os.path.join(checkpoints, f"quickstart-{TOPIC}"))
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
streamed = spark.read.parquet(table).where(F.col("key").startswith(RUN))
show(streamed.orderBy("key"))
n_streamed = streamed.count()

print(
    f"quickstart: read_committed={n_committed} read_uncommitted={n_uncommitted} "
    f"streamed={n_streamed}"
)
assert (n_committed, n_uncommitted, n_streamed) == (5, 8, 5)

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
