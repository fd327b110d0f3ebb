"""Our own Kafka protocol client (transactional producer, admin calls) on kio.

It imports neither pyspark nor the embedded cluster (an import-linter contract).
"""
