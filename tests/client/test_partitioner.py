"""Keyed records land where librdkafka's ``murmur2_random`` (= Java's default) puts them."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
from confluent_kafka import Producer

from pyspark_kafka_txn.client.partitioner import partition_for
from tests.support.clients import consume_all
from tests.support.target import KafkaTarget

PARTITIONS = 7


def test_murmur2_equals_librdkafka_for_10000_random_keys(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=PARTITIONS)
    rng = random.Random(20261122)
    keys = [rng.randbytes(rng.randrange(1, 40)) for _ in range(10_000)]
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        }
    )
    for key in keys:
        producer.produce(topic, key=key, value=key)  # the value echoes the key
        producer.poll(0)
    assert producer.flush(30) == 0
    placed = {
        value: part
        for part, _, value in consume_all(
            kafka.bootstrap_servers, topic, PARTITIONS, isolation="read_uncommitted"
        )
    }
    assert len(placed) == len(set(keys))
    ours = partition_for(pa.array(keys), np.ones(len(keys), dtype=np.int64), PARTITIONS)
    mismatches = [k for k, p in zip(keys, ours.tolist(), strict=True) if placed[k] != p]
    assert not mismatches, f"{len(mismatches)} keys partitioned differently"
    assert len(set(ours.tolist())) == PARTITIONS
