"""What the reader's driver planning and its executors share.

:class:`KafkaInputPartition` is the unit the driver plans and an executor reads: one
topic-partition range, picklable; :class:`KafkaInputPartitions` packs several of them into
one task (``minRecordsPerPartition``). Both sides report data loss the same way
(:func:`report_data_loss`, following ``failOnDataLoss``) and name a missing ACL the same way
(:func:`not_authorized`).

This module imports no Kafka client: ``kio`` is imported only while an authorization error
is being built (it costs 0.3 s to import and the reader never needs it otherwise).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from pyspark_kafka_txn.client.errors import RESOURCE_TOPIC
from pyspark_kafka_txn.errors import AuthorizationError, DataLossError
from pyspark_kafka_txn.options import ReaderOptions
from pyspark_kafka_txn.wire import TopicPartition

__all__ = ["KafkaInputPartition", "KafkaInputPartitions", "not_authorized", "report_data_loss"]

logger = logging.getLogger(__name__)

_DATA_LOSS_HINT = (
    " Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    "set the source option 'failOnDataLoss' to 'false'."
)


def not_authorized(
    options: ReaderOptions, code: int, operation: str, topic: str, context: str
) -> AuthorizationError:
    """The error of a refused operation on ``topic``, naming the ACL the reader needs.

    Parameters
    ----------
    options
        The reader's options (the SASL username names the principal; no secret is used).
    code
        Kafka's error code (29).
    operation
        The operation Kafka checked (``READ`` for Fetch, ``DESCRIBE`` for metadata).
    topic
        The topic.
    context
        The request.

    Returns
    -------
    AuthorizationError
        With a hint: Read on the topic (it implies Describe).
    """
    from kio.schema.errors import ErrorCode  # only on this error path: kio is slow to import

    error = AuthorizationError(ErrorCode(code), operation, RESOURCE_TOPIC, topic, context)
    return error.with_acl(
        options.kafka_params.get("sasl.username"),
        f"--operation Read --topic {topic}",
        "see 'Least-privilege ACLs' in the kafka_txn reader's documentation",
    )


def report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise DataLossError(message + _DATA_LOSS_HINT)
    logger.warning("%s Continuing because failOnDataLoss is false.", message)


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic-partition. Picklable."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        """The topic-partition read."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class KafkaInputPartitions(InputPartition):
    """One Spark task reading several ranges one after the other (``minRecordsPerPartition``).

    Picklable.
    """

    ranges: tuple[KafkaInputPartition, ...]
