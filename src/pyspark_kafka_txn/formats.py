"""The versions of the durable formats: what one run leaves for a later run to read.

The package keeps five kinds of records outside the process that wrote them, and a later
run — possibly of another version of the package — reads them back
(``docs/design.md``, "Durable formats"):

* the **decision record** (:mod:`~pyspark_kafka_txn.writer.decision`): offset metadata of
  the groups ``{prefix}{Q}-decision`` (header) and ``…-decision-{slot}-{k}`` (chunks);
  version in the header's ``"f"``, which covers the chunks;
* the **batch marker** (:mod:`~pyspark_kafka_txn.writer.common`): offset metadata each
  task commits in its transaction, group ``{prefix}{Q}-{P}``; version in ``"w"``;
* the **claim** of an idempotent batch write (:mod:`~pyspark_kafka_txn.writer.idempotent`):
  offset metadata of the group ``{prefix}{Q}-writer``; version in ``"f"``;
* the **liveness lease** of a query (:mod:`~pyspark_kafka_txn.writer.liveness`): offset
  metadata of the group ``{prefix}{Q}-alive``; version in ``"f"``;
* the **reader offsets** in Spark's checkpoint (:mod:`~pyspark_kafka_txn.offsets`):
  version 1 is Spark's own shape, which ``format("kafka")`` also reads, and has no
  version key; any later version carries ``"@format"``.

Each is at version 1. The rule: a version of the package reads every format from
:attr:`DurableFormat.oldest` to :attr:`DurableFormat.current` and writes ``current``; a
record of any other format
(a newer package wrote it) raises :class:`~pyspark_kafka_txn.errors.FormatVersionError`
naming the record, the format found and the formats read — never skipped, never guessed.
A format changes its number whenever an older package would misread the new one; the
tests keep records written by each released format (``tests/unit/test_formats.py``).

Only :mod:`pyspark_kafka_txn.errors` and the version are imported: the reader's
(:mod:`~pyspark_kafka_txn.offsets`) and the writer's modules both use this one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark_kafka_txn._version import __version__
from pyspark_kafka_txn.errors import FormatVersionError

_R = TypeVar("_R")

__all__ = [
    "BATCH_MARKER",
    "CLAIM",
    "DECISION_RECORD",
    "LIVENESS_LEASE",
    "READER_OFFSETS",
    "DurableFormat",
    "version_field",
]


@dataclass(frozen=True, slots=True)
class DurableFormat:
    """One durable format: its name in messages and the versions this package reads.

    Attributes
    ----------
    name
        What the record is called in an error message ("decision record").
    current
        The version this package writes (and the newest it reads).
    oldest
        The oldest version it still reads.
    """

    name: str
    current: int
    oldest: int = 1

    def check(self, found: int, whose: str) -> int:
        """Return ``found`` if this package reads it, else raise.

        Parameters
        ----------
        found
            The version the record carries.
        whose
            Names the record in the message ("of query 5f0c…, group x-5f0c…-decision").

        Returns
        -------
        int
            ``found``.

        Raises
        ------
        FormatVersionError
            If ``found`` is outside ``oldest`` … ``current``.
        """
        if self.oldest <= found <= self.current:
            return found
        remedy = (
            "A newer pyspark-kafka-txn wrote it: upgrade pyspark-kafka-txn to a version "
            f"that reads {self.name} format {found}"
            if found > self.current
            else f"No version of pyspark-kafka-txn writes {self.name} format {found}"
        )
        raise self.error(f"has format {found}", whose, found=found, remedy=remedy)

    def decode(self, metadata: str | None, key: str, whose: str) -> dict[str, Any] | None:
        """The fields of a record of this format kept as JSON text (offset-commit metadata).

        Parameters
        ----------
        metadata
            The text as read back.
        key
            The field holding the version (``"f"``, ``"w"``).
        whose
            Names the record in an error message (:meth:`check`).

        Returns
        -------
        dict or None
            The decoded fields; None for metadata that is not a record of ours (none, not
            JSON, or no integer under ``key``).

        Raises
        ------
        FormatVersionError
            If the record's version is one this package does not read.
        """
        if not metadata:
            return None
        try:
            fields = json.loads(metadata)
        except ValueError:
            return None
        found = version_field(fields, key)
        if found is None:
            return None
        self.check(found, whose)
        decoded: dict[str, Any] = fields
        return decoded

    def read(
        self, metadata: str | None, whose: str, build: Callable[[dict[str, Any]], _R]
    ) -> _R | None:
        """A record of this format (version in ``"f"``) built from its fields, or None.

        Parameters
        ----------
        metadata
            The text as read back (offset-commit metadata).
        whose
            Names the record in an error message.
        build
            Makes the record of the decoded fields; a field it lacks or cannot convert
            (``KeyError``, ``TypeError``, ``ValueError``) means no record of ours.

        Returns
        -------
        record or None
            None for what :meth:`decode` takes for no record of ours, and for fields
            ``build`` refuses.

        Raises
        ------
        FormatVersionError
            If the record's version is one this package does not read.
        """
        fields = self.decode(metadata, "f", whose)
        if fields is None:
            return None
        try:
            return build(fields)
        except (KeyError, TypeError, ValueError):
            return None

    def error(
        self, what: str, whose: str, *, found: int | None = None, remedy: str | None = None
    ) -> FormatVersionError:
        """The error for a record of ``whose`` that ``what`` (e.g. "has format 3")."""
        formats = (
            f"format {self.current}"
            if self.oldest == self.current
            else f"formats {self.oldest} to {self.current}"
        )
        message = (
            f"The {self.name} {whose} {what}; this package (pyspark-kafka-txn "
            f"{__version__}) reads {self.name} {formats}. "
            f"{remedy or 'A newer pyspark-kafka-txn wrote it: upgrade pyspark-kafka-txn'}."
        )
        return FormatVersionError(message, found=found, oldest=self.oldest, newest=self.current)


#: The driver's commit decision record (``writer/decision.py``): header field ``"f"``.
#: The chunks (the handle list) have no field of their own: the header's version covers
#: them.
DECISION_RECORD = DurableFormat("decision record", 1)
#: The batch marker each task commits in its transaction (``writer/common.py``): ``"w"``.
BATCH_MARKER = DurableFormat("batch marker", 1)
#: The claim of an idempotent batch write (``writer/idempotent.py``): ``"f"``.
CLAIM = DurableFormat("idempotent-write claim", 1)
#: A query's liveness lease (``writer/liveness.py``): ``"f"``.
LIVENESS_LEASE = DurableFormat("liveness lease", 1)
#: The streaming reader's offsets in Spark's checkpoint (``offsets.py``): version 1 is
#: Spark's own shape (also read and written by ``format("kafka")``) with no version key;
#: a later version adds ``"@format"``.
READER_OFFSETS = DurableFormat("reader offset", 1)


def version_field(fields: object, key: str) -> int | None:
    """The version under ``key`` of a decoded JSON record, None if it names none.

    ``None`` for anything but a JSON object with an integer (not a boolean) under
    ``key``: such metadata is not a record of ours.
    """
    if not isinstance(fields, dict):
        return None
    value = fields.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value
