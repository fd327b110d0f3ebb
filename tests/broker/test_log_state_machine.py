"""Hypothesis state machine: the log's LSO and read_committed view against a model."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pyspark_kafka_txn.embedded.log import PartitionLog
from pyspark_kafka_txn.embedded.validation import BatchRules, validate_client_batches
from pyspark_kafka_txn.wire import READ_COMMITTED, READ_UNCOMMITTED
from tests.support.batches import batch, decode_committed

PIDS = st.integers(min_value=1, max_value=4)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.log = PartitionLog("t", 0)
        self.seq: dict[int, int] = {}
        self.open: dict[int, list[tuple[int, bytes]]] = {}  # pid -> pending records
        self.open_first: dict[int, int] = {}
        self.visible: list[tuple[int, bytes]] = []  # committed view (offset, value)
        self.all: list[tuple[int, bytes]] = []
        self.counter = 0

    def _append(self, pid: int, values: list[bytes], transactional: bool) -> int:
        seq = self.seq.get(pid, 0)
        data = batch(
            values, producer_id=pid, epoch=0, base_sequence=seq, transactional=transactional
        )
        header = validate_client_batches(data, BatchRules(10**6), api_version=9)
        base = self.log.append_client_batch(header, data, now_ms=0, verified=True).base_offset
        self.seq[pid] = seq + len(values)
        return base

    def _values(self, n: int) -> list[bytes]:
        out = []
        for _ in range(n):
            self.counter += 1
            out.append(f"v{self.counter}".encode())
        return out

    @rule(pid=PIDS, n=st.integers(1, 3))
    def write_transactional(self, pid: int, n: int) -> None:
        values = self._values(n)
        base = self._append(pid, values, True)
        recs = [(base + i, v) for i, v in enumerate(values)]
        self.open.setdefault(pid, []).extend(recs)
        self.open_first.setdefault(pid, base)
        self.all.extend(recs)

    @rule(pid=st.integers(min_value=10, max_value=11), n=st.integers(1, 3))
    def write_plain(self, pid: int, n: int) -> None:
        values = self._values(n)
        base = self._append(pid, values, False)
        recs = [(base + i, v) for i, v in enumerate(values)]
        self.visible.extend(recs)
        self.all.extend(recs)

    @rule(pid=PIDS, commit=st.booleans())
    def end(self, pid: int, commit: bool) -> None:
        if pid not in self.open:
            return
        self.log.append_marker(pid, 0, commit=commit, coordinator_epoch=0, now_ms=0)
        recs = self.open.pop(pid)
        del self.open_first[pid]
        if commit:
            self.visible.extend(recs)

    @invariant()
    def lso_is_first_open_offset(self) -> None:
        hw = self.log.high_watermark
        expected = min(self.open_first.values(), default=hw)
        assert self.log.last_stable_offset == expected <= hw

    @invariant()
    def read_committed_matches_model(self) -> None:
        lso = self.log.last_stable_offset
        result = self.log.read(0, 10**9, READ_COMMITTED)
        aborted = [(a.producer_id, a.first_offset) for a in result.aborted or []]
        got = [(r.offset, r.value) for r in decode_committed(result.records, aborted)]
        assert got == sorted(r for r in self.visible if r[0] < lso)

    @invariant()
    def paginated_read_committed_matches_model(self) -> None:
        """One batch per fetch, as a consumer with tiny fetch sizes reads."""
        lso = self.log.last_stable_offset
        offset, got = 0, []
        while offset < lso:
            result = self.log.read(offset, 1, READ_COMMITTED)
            assert result.records, f"no progress at {offset} below LSO {lso}"
            aborted = [(a.producer_id, a.first_offset) for a in result.aborted or []]
            got += [(r.offset, r.value) for r in decode_committed(result.records, aborted)]
            last_delta = int.from_bytes(result.records[23:27], "big", signed=True)
            offset = int.from_bytes(result.records[:8], "big") + last_delta + 1
        assert got == sorted(r for r in self.visible if r[0] < lso)

    @invariant()
    def read_uncommitted_sees_everything(self) -> None:
        result = self.log.read(0, 10**9, READ_UNCOMMITTED)
        got = [(r.offset, r.value) for r in decode_committed(result.records, None)]
        assert got == sorted(self.all)


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
