"""The raw protocol client: kio entities over plain sockets, for what real clients hide."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import request as offset_fetch_v7

from tests.broker.clients import raw_request


def stable_offset_fetch_error(bootstrap_servers: str, group: str, topic: str) -> ErrorCode:
    """Partition 0's error in a raw OffsetFetch v7 with RequireStable, from the group's
    coordinator (every other broker answers NOT_COORDINATOR)."""
    codes = []
    for address in bootstrap_servers.split(","):
        host, port = address.rsplit(":", 1)
        answer = raw_request(
            (host, int(port)),
            9,
            7,
            offset_fetch_v7.OffsetFetchRequest(
                group_id=offset_fetch_v7.GroupId(group),
                topics=(
                    offset_fetch_v7.OffsetFetchRequestTopic(
                        name=offset_fetch_v7.TopicName(topic),
                        partition_indexes=(offset_fetch_v7.i32(0),),
                    ),
                ),
                require_stable=True,
            ),
        )
        if answer.error_code is not ErrorCode.not_coordinator:
            codes.append(answer.topics[0].partitions[0].error_code)
    assert len(codes) == 1, codes
    return ErrorCode(codes[0])
