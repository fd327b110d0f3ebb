"""Request handlers, grouped by the state owner they touch.

Each handler is a function ``(ctx, request_body) -> response_body`` (a coroutine for the
ones that wait: Fetch and the group rebalance calls) with a header docstring stating the
versions it serves, its behaviour and its simplifications. :mod:`.table` joins them into
the dispatch table (:data:`~pyspark_kafka_txn.embedded.handlers.table.APIS`).

Modules: :mod:`.metadata` (ApiVersions, Metadata, FindCoordinator), :mod:`.topics`
(CreateTopics, DeleteTopics, CreatePartitions), :mod:`.configs` (DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs), :mod:`.data` (Produce, Fetch, ListOffsets, ...),
:mod:`.groups` (offsets), :mod:`.membership` (classic groups), :mod:`.txn`
(transactions), :mod:`.sasl`, :mod:`.acls`, :mod:`.table`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_kafka_txn._lazy import lazy_exports

if TYPE_CHECKING:
    from pyspark_kafka_txn.embedded.handlers.table import APIS, apis_for

__all__ = ["APIS", "apis_for"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "APIS": "pyspark_kafka_txn.embedded.handlers.table",
        "apis_for": "pyspark_kafka_txn.embedded.handlers.table",
    },
)
