"""The dispatch table of the embedded broker: every handler module's APIs joined.

An API that can be refused before it touches any state (for example
NOT_LEADER_OR_FOLLOWER from a former leader, COORDINATOR_LOAD_IN_PROGRESS from a
coordinator still loading its log) has an error response builder
``(ctx, request, code) -> response`` next to its handler, registered as
``ApiSpec.error_response``: it answers every partition, key or the whole request with
``code``, in the shape the negotiated version needs. ``BrokerServer`` uses them for the
``error`` fault action; the handler is then never called.
"""

from __future__ import annotations

import dataclasses

from pyspark_kafka_txn.embedded.config import ClusterConfig
from pyspark_kafka_txn.embedded.dispatch import ApiSpec
from pyspark_kafka_txn.embedded.handlers import (
    acls,
    configs,
    data,
    groups,
    membership,
    metadata,
    sasl,
    topics,
    txn,
)
from pyspark_kafka_txn.wire import INIT_PRODUCER_ID

__all__ = ["APIS", "apis_for"]

APIS: dict[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        *metadata.SPECS,
        *topics.SPECS,
        *configs.SPECS,
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
    (``unstable_api_versions``), which ``transaction_two_phase_commit`` implies. Then the
    test aid ``api_max_versions`` caps APIs as an older release would serve them.
    """
    apis = dict(APIS)
    if config.transaction_two_phase_commit or config.unstable_api_versions:
        apis[INIT_PRODUCER_ID] = dataclasses.replace(
            APIS[INIT_PRODUCER_ID], max_version=txn.INIT_PRODUCER_ID_2PC_VERSION
        )
    for api_key, highest in config.api_max_versions:
        spec = apis.get(api_key)
        if spec is None:
            continue
        if highest < spec.min_version:
            del apis[api_key]
        else:
            apis[api_key] = dataclasses.replace(spec, max_version=min(highest, spec.max_version))
    return apis
