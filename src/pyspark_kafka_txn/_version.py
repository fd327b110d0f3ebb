"""The package's version, written once: setup.cfg reads it (``attr:``, without importing the
package), ``pyspark_kafka_txn.__version__`` re-exports it, and ``kafka-txn --version``
prints it. A module of its own so that the CLI reads it without importing the package's
``__init__`` (whose :func:`~pyspark_kafka_txn.register` refers to pyspark).

The oldest Kafka the package supports is here too, beside the other facts a user checks
before installing: the oldest Python is setup.cfg's ``python_requires`` and the oldest
PySpark its ``spark`` extra. ``tests/docs/test_docs_versions.py`` checks that the README
and every docs page state these three and no others."""

__version__ = "0.1.0.dev0"

#: The oldest Apache Kafka release the package supports: the oldest one its tests have run
#: against (``make compat``, docs/compatibility.md). Older brokers have the protocol the
#: features need (docs/compatibility.md lists each feature's) but were never tested.
MINIMUM_KAFKA = "3.0.2"
