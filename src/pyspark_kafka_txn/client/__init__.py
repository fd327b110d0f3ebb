"""Our own Kafka protocol client (transactional producer, admin calls) on kio.

It imports neither pyspark nor the embedded cluster (an import-linter contract).

Modules: ``errors`` (exception hierarchy), ``connection`` (framing, pipelining, version
negotiation), ``metadata`` (leaders, coordinators), ``records`` (record batch v2 encoding
from Arrow), ``partitioner`` (Java-compatible murmur2), ``producer`` (transactional
producer, ``end_transaction``), ``admin`` (CreateTopics, DescribeConfigs,
List/DescribeTransactions, OffsetFetch). See docs/client.md.
"""
