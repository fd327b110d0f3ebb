"""Request handlers, grouped by the state owner they touch.

Each handler is a function ``(ctx, request_body) -> response_body`` (a coroutine for the
ones that wait: Fetch and the group rebalance calls) with a header docstring stating the
versions it serves, its behaviour and its simplifications.
"""

from __future__ import annotations

from pyspark_kafka_txn.embedded.dispatch import ApiSpec
from pyspark_kafka_txn.embedded.handlers import cluster, data, groups, membership, sasl, txn

APIS: dict[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        *cluster.SPECS,
        *data.SPECS,
        *txn.SPECS,
        *groups.SPECS,
        *membership.SPECS,
        *sasl.SPECS,
    )
}
