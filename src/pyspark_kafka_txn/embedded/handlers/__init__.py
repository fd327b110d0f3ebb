"""Request handlers, grouped by the state owner they touch.

Each handler is a function ``(ctx, request_body) -> response_body`` (a coroutine for the
ones that wait: Fetch and the group rebalance calls) with a header docstring stating the
versions it serves, its behaviour and its simplifications.
"""

from __future__ import annotations

import dataclasses

from pyspark_kafka_txn.embedded.config import ClusterConfig
from pyspark_kafka_txn.embedded.dispatch import ApiSpec
from pyspark_kafka_txn.embedded.handlers import acls, cluster, data, groups, membership, sasl, txn
from pyspark_kafka_txn.embedded.wire import INIT_PRODUCER_ID

APIS: dict[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        *cluster.SPECS,
        *data.SPECS,
        *txn.SPECS,
        *groups.SPECS,
        *membership.SPECS,
        *sasl.SPECS,
        *acls.SPECS,
    )
}
"""The APIs of a default cluster (a default Kafka 4.3 broker: InitProducerId v0-5)."""


def apis_for(config: ClusterConfig) -> dict[int, ApiSpec]:
    """The dispatch table (hence the ApiVersions answer) of a cluster with ``config``.

    InitProducerId v6 (KIP-939) is still ``latestVersionUnstable`` in Kafka 4.3, so it is
    advertised only as by a broker with ``unstable.api.versions.enable=true``
    (``unstable_api_versions``), which ``transaction_two_phase_commit`` implies.
    """
    if not (config.transaction_two_phase_commit or config.unstable_api_versions):
        return APIS
    apis = dict(APIS)
    apis[INIT_PRODUCER_ID] = dataclasses.replace(
        APIS[INIT_PRODUCER_ID], max_version=txn.INIT_PRODUCER_ID_2PC_VERSION
    )
    return apis
