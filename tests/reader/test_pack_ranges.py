"""``minRecordsPerPartition``: small offset ranges packed into few Spark tasks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_kafka_txn.offsets import OffsetRange, pack_ranges, split_ranges
from pyspark_kafka_txn.wire import TopicPartition


def _key(r: OffsetRange) -> tuple[str, int, int]:
    return (r.tp.topic, r.tp.partition, r.start)


def _ranges(sizes: list[int]) -> list[OffsetRange]:
    return [OffsetRange(TopicPartition("t", p), 100, 100 + size) for p, size in enumerate(sizes)]


def test_without_the_option_every_range_is_its_own_task() -> None:
    ranges = _ranges([3, 5, 7])
    assert pack_ranges(ranges, min_records_per_partition=None) == [(r,) for r in ranges]


def test_a_small_batch_becomes_one_task_in_partition_order() -> None:
    ranges = _ranges([3, 5, 7, 1])
    assert pack_ranges(ranges, min_records_per_partition=1000) == [tuple(ranges)]


def test_large_ranges_stay_apart() -> None:
    ranges = _ranges([5000, 6000, 7000])
    assert pack_ranges(ranges, min_records_per_partition=1000) == [(r,) for r in ranges]


def test_packs_to_the_fewest_tasks_of_at_least_the_minimum() -> None:
    # 4 x 300 = 1200 offsets, at least 500 per task: 2 tasks, 600 each.
    ranges = _ranges([300, 300, 300, 300])
    packed = pack_ranges(ranges, min_records_per_partition=500)
    assert [sum(r.size for r in task) for task in packed] == [600, 600]
    assert sorted((r for task in packed for r in task), key=_key) == sorted(ranges, key=_key)


def test_min_partitions_and_max_records_bound_the_packing() -> None:
    ranges = _ranges([10, 10, 10, 10, 10, 10])
    assert len(pack_ranges(ranges, min_records_per_partition=1000, min_partitions=3)) == 3
    by_max = pack_ranges(ranges, min_records_per_partition=1000, max_records_per_partition=20)
    assert [sum(r.size for r in task) for task in by_max] == [20, 20, 20]


@settings(deadline=None)  # a busy 2-core machine: no per-example time limit
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=40),
    minimum=st.integers(min_value=1, max_value=20_000),
    maximum=st.one_of(st.none(), st.integers(min_value=1, max_value=8000)),
    min_partitions=st.one_of(st.none(), st.integers(min_value=1, max_value=50)),
)
def test_every_offset_is_read_exactly_once_within_the_bounds(
    sizes: list[int], minimum: int, maximum: int | None, min_partitions: int | None
) -> None:
    ranges = split_ranges(
        _ranges(sizes), min_partitions=min_partitions, max_records_per_partition=maximum
    )
    packed = pack_ranges(
        ranges,
        min_records_per_partition=minimum,
        max_records_per_partition=maximum,
        min_partitions=min_partitions,
    )
    # Every range exactly once, and the ranges of one task in their planned order.
    assert sorted((r for task in packed for r in task), key=_key) == sorted(ranges, key=_key)
    position = {r: i for i, r in enumerate(ranges)}
    for task in packed:
        assert [position[r] for r in task] == sorted(position[r] for r in task)
    loads = [sum(r.size for r in task) for task in packed]
    if maximum is not None:
        assert max(loads) <= maximum
    total = sum(loads)
    wanted = max(total // minimum, 1, min_partitions or 1)
    # Never more tasks than the ranges, never fewer than asked for (or than the ranges).
    assert min(wanted, len(ranges)) <= len(packed) <= len(ranges)
    if len(packed) < len(ranges) and maximum is None:
        # Packed tasks are as many as the minimum asks for: each holds about its share.
        assert len(packed) == wanted
