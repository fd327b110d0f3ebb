"""The package's version, written once: setup.cfg reads it (``attr:``, without importing the
package), ``pyspark_kafka_txn.__version__`` re-exports it, and ``kafka-txn --version``
prints it. A module of its own so that the CLI reads it without importing the package's
``__init__`` (whose :func:`~pyspark_kafka_txn.register` refers to pyspark)."""

__version__ = "0.1.0.dev0"
