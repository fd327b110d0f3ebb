"""Building kio entities from keyword arguments (``pyspark_kafka_txn.kio_entities``, used by
the broker's ``embedded.protocol.build`` and the client's ``client.connection.build``): a
field no version of the entity has raises naming it; a version-gated field is dropped only
where the entity's version lacks it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.end_txn.v4 import request as end_txn_v4
from kio.schema.end_txn.v5 import response as end_txn_v5_response
from kio.schema.fetch.v12 import response as fetch_v12
from kio.schema.fetch.v13 import response as fetch_v13
from kio.schema.list_offsets.v1 import response as list_offsets_v1
from kio.schema.list_offsets.v4 import response as list_offsets_v4

from pyspark_kafka_txn.client import connection
from pyspark_kafka_txn.embedded import protocol
from pyspark_kafka_txn.kio_entities import UnknownFieldError, build, field_names, version_gated

BUILDERS: list[Callable[..., Any]] = [build, protocol.build, connection.build]


@pytest.mark.parametrize("builder", BUILDERS, ids=["kio_entities", "embedded", "client"])
def test_unknown_field_raises_naming_entity_version_and_field(
    builder: Callable[..., Any],
) -> None:
    with pytest.raises(UnknownFieldError) as caught:
        builder(
            list_offsets_v4.ListOffsetsPartitionResponse,
            partition_index=0,
            error_code=0,
            timestamp=-1,
            offset=-1,
            leader_epoch=-1,
            leader_epok=-1,
        )
    message = str(caught.value)
    assert "ListOffsetsPartitionResponse" in message
    assert "list_offsets v4 response" in message
    assert "'leader_epok'" in message
    assert caught.value.version == 4
    assert caught.value.fields == ("leader_epok",)


def test_unknown_field_raises_even_with_version_gated_ones() -> None:
    """Dropping a gated field does not let an unknown one through."""
    with pytest.raises(UnknownFieldError, match="'no_such_field'"):
        build(
            fetch_v12.FetchableTopicResponse,
            topic="t",
            topic_id=uuid.uuid4(),
            partitions=(),
            no_such_field=1,
        )


def test_version_gated_field_dropped_only_where_the_version_lacks_it() -> None:
    topic_id = uuid.uuid4()
    old = build(fetch_v12.FetchableTopicResponse, topic="t", topic_id=topic_id, partitions=())
    assert old.topic == "t"
    assert not hasattr(old, "topic_id")
    new = build(fetch_v13.FetchableTopicResponse, topic="t", topic_id=topic_id, partitions=())
    assert new.topic_id == topic_id
    assert not hasattr(new, "topic")
    assert version_gated(fetch_v12.FetchableTopicResponse) >= {"topic_id"}
    assert "topic" in version_gated(fetch_v13.FetchableTopicResponse)


def test_field_of_a_later_version_is_dropped_at_an_earlier_one() -> None:
    """``leader_epoch`` exists from ListOffsets v4: v1 drops it, v4 keeps it."""
    fields: dict[str, Any] = {
        "partition_index": 3,
        "error_code": 0,
        "timestamp": -1,
        "offset": 7,
        "leader_epoch": 2,
    }
    assert "leader_epoch" in version_gated(list_offsets_v1.ListOffsetsPartitionResponse)
    v1 = build(list_offsets_v1.ListOffsetsPartitionResponse, **fields)
    assert not hasattr(v1, "leader_epoch")
    assert v1.offset == 7
    assert build(list_offsets_v4.ListOffsetsPartitionResponse, **fields).leader_epoch == 2


def test_field_only_in_responses_is_unknown_to_the_request() -> None:
    """Requests and responses are different entities: a response field is not gated in the
    request of the same API."""
    assert "throttle_time" in field_names(end_txn_v5_response.EndTxnResponse)
    with pytest.raises(UnknownFieldError, match="'throttle_time'"):
        build(
            end_txn_v4.EndTxnRequest,
            transactional_id="t",
            producer_id=1,
            producer_epoch=0,
            committed=True,
            throttle_time=0,
        )
