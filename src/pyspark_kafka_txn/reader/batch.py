"""The batch reader of ``kafka_txn``: ``spark.read.format("kafka_txn")``.

:class:`KafkaBatchReader` resolves the starting and ending bounds once, caps the end at the
LSO (or the high watermark under ``read_uncommitted``) and plans one task per
topic-partition range; the tasks read through
:func:`~pyspark_kafka_txn.reader.executor.read_range`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.reader.base import KafkaReader

__all__ = ["KafkaBatchReader"]

logger = logging.getLogger(__name__)


class KafkaBatchReader(KafkaReader, DataSourceReader):
    """``spark.read.format("kafka_txn")``: one bounded read between two offset bounds.

    Created with validated options (``ending`` set); see
    :class:`~pyspark_kafka_txn.reader.base.KafkaReader`.
    """

    def partitions(self) -> Sequence[InputPartition]:
        """Resolve both bounds (LSO-capped) and plan the tasks."""
        client = self._offsets()
        tps = client.topic_partitions(at_start=True)
        start = client.resolve(self.options.starting, tps, ending=False)
        assert self.options.ending is not None
        end = client.resolve(self.options.ending, tps, ending=True)
        latest = client.latest(tps)
        for tp in tps:
            if end[tp] > latest[tp]:
                logger.warning(
                    "Ending offset %d of %s is past the %s %d; reading up to it",
                    end[tp],
                    tp,
                    "last stable offset" if self.options.read_committed else "high watermark",
                    latest[tp],
                )
                end[tp] = latest[tp]
            if end[tp] < start[tp]:
                raise ConfigError(
                    f"Option 'endingOffsets': ending offset {end[tp]} of {tp} is before the "
                    f"starting offset {start[tp]}"
                )
        return self._tasks(start, end)
