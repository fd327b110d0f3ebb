"""Kafka wire-protocol constants, each defined once for the whole package.

This module owns the numbers the Kafka protocol fixes that the protocol client and the
embedded broker use: the API keys (of the requests the broker serves and the client
sends), FindCoordinator's key types, the isolation levels of Fetch and ListOffsets, the
control record types of transaction markers, ListOffsets' special timestamps, the config
resource types and operations of DescribeConfigs / AlterConfigs /
IncrementalAlterConfigs, the "no producer" values of record batches and the
transaction coordinator, the ``security.protocol`` and SASL mechanism names, the names of
a transaction's states (:class:`TxnState`) and the one topic-partition type
(:class:`TopicPartition`). It
imports nothing, so both ``client`` and ``embedded`` share it from below.

kio has no enumeration of API keys (``kio.schema.index.api_key_map`` maps each key to
its schema's name); every ``*`` API key here is named after that schema, upper-cased,
and ``tests/wire/test_wire.py`` checks each against kio. Error codes are kio's
``ErrorCode``; the broker's ACL codes are ``embedded.acl``'s enums; DescribeConfigs'
config types are ``embedded.topic_config.ConfigType``.
"""

from __future__ import annotations

import enum
from typing import Final, NamedTuple


class TopicPartition(NamedTuple):
    """A topic-partition: the one type of the package (reader, writer, client, broker).

    A tuple, so ``(topic, partition)`` works as a key wherever one is looked up.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class TxnState(enum.StrEnum):
    """Kafka's ``TransactionState`` names, as DescribeTransactions and ListTransactions
    report them (a member equals its name as a string): the states the embedded
    coordinator persists and the ones the writer asks about."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


# --- API keys ------------------------------------------------------------------------

PRODUCE: Final = 0
FETCH: Final = 1
LIST_OFFSETS: Final = 2
METADATA: Final = 3
OFFSET_COMMIT: Final = 8
OFFSET_FETCH: Final = 9
FIND_COORDINATOR: Final = 10
JOIN_GROUP: Final = 11
HEARTBEAT: Final = 12
LEAVE_GROUP: Final = 13
SYNC_GROUP: Final = 14
DESCRIBE_GROUPS: Final = 15
LIST_GROUPS: Final = 16
SASL_HANDSHAKE: Final = 17
API_VERSIONS: Final = 18
CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
DELETE_RECORDS: Final = 21
INIT_PRODUCER_ID: Final = 22
OFFSET_FOR_LEADER_EPOCH: Final = 23
ADD_PARTITIONS_TO_TXN: Final = 24
ADD_OFFSETS_TO_TXN: Final = 25
END_TXN: Final = 26
WRITE_TXN_MARKERS: Final = 27
TXN_OFFSET_COMMIT: Final = 28
DESCRIBE_ACLS: Final = 29
CREATE_ACLS: Final = 30
DELETE_ACLS: Final = 31
DESCRIBE_CONFIGS: Final = 32
ALTER_CONFIGS: Final = 33
SASL_AUTHENTICATE: Final = 36
CREATE_PARTITIONS: Final = 37
DELETE_GROUPS: Final = 42
INCREMENTAL_ALTER_CONFIGS: Final = 44
OFFSET_DELETE: Final = 47
DESCRIBE_USER_SCRAM_CREDENTIALS: Final = 50
ALTER_USER_SCRAM_CREDENTIALS: Final = 51
DESCRIBE_PRODUCERS: Final = 61
DESCRIBE_TRANSACTIONS: Final = 65
LIST_TRANSACTIONS: Final = 66

#: The APIs a connection may use before SASL authentication completes.
PRE_AUTH_APIS: Final = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

# --- FindCoordinator key types ----------------------------------------------------

COORDINATOR_GROUP: Final = 0
COORDINATOR_TXN: Final = 1

# --- isolation levels (Fetch, ListOffsets) ----------------------------------------

READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1

# --- control record types (the key of a transaction marker) ----------------------

CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1

# --- ListOffsets special timestamps -----------------------------------------------

LATEST: Final = -1
EARLIEST: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL: Final = -4
LATEST_TIERED: Final = -5

# --- config resource types (DescribeConfigs, AlterConfigs) ------------------------

TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
GROUP_RESOURCE: Final = 32

# --- IncrementalAlterConfigs operations -------------------------------------------

SET: Final = 0
DELETE: Final = 1
APPEND: Final = 2
SUBTRACT: Final = 3

# --- producers ----------------------------------------------------------------------

NO_PRODUCER_ID: Final = -1
NO_EPOCH: Final = -1

# --- security.protocol (listeners and clients) ----------------------------------------

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms (``sasl.mechanism``) that authenticate with a user name and password.
PASSWORD_SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: The SASL mechanisms (``sasl.mechanism``) both sides implement (OAUTHBEARER: RFC 7628).
SASL_MECHANISMS: Final = (*PASSWORD_SASL_MECHANISMS, "OAUTHBEARER")
#: The protocols whose connections are wrapped in TLS.
TLS_PROTOCOLS: Final = frozenset({"SSL", "SASL_SSL"})
#: The protocols whose connections authenticate with SASL after ApiVersions.
SASL_PROTOCOLS: Final = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
