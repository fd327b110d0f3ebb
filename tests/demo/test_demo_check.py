"""The demo's verdict can fail: each kind of anomaly makes exactly its check fail."""

from __future__ import annotations

import pytest

from pyspark_kafka_txn.demo.feed import FeedPlan
from pyspark_kafka_txn.demo.output import check

COMMITTED = [1, 2, 3, 4]
ABORTED = [10, 11]
OPEN = "no transaction left open in the output (LSO = high watermark)"


def _failed(output: list[int], pinned: dict[int, tuple[int, int]] | None = None) -> list[str]:
    return [c.name for c in check(COMMITTED, ABORTED, output, pinned or {}) if not c.ok]


def test_exactly_once_passes() -> None:
    assert _failed([4, 2, 1, 3]) == []


@pytest.mark.parametrize(
    ("output", "pinned", "failing"),
    [
        ([1, 2, 3], {}, "every committed input order is in the output"),
        ([1, 2, 3, 4, 2], {}, "no order twice"),
        ([1, 2, 3, 4, 11], {}, "nothing of the aborted input transactions"),
        ([1, 2, 3, 4, 99], {}, "nothing else"),
        ([1, 2, 3, 4], {1: (5, 9)}, OPEN),
    ],
)
def test_each_anomaly_fails_its_check(
    output: list[int], pinned: dict[int, tuple[int, int]], failing: str
) -> None:
    assert _failed(output, pinned) == [failing]


def test_details_name_the_orders_at_fault() -> None:
    by_name = {c.name: c for c in check(COMMITTED, ABORTED, [1, 1, 2, 10], {})}
    assert by_name["every committed input order is in the output"].detail == "missing: 3, 4"
    assert by_name["no order twice"].detail == "more than once: 1"
    assert by_name["nothing of the aborted input transactions"].detail == "visible: 10"


def test_the_flagged_order_is_never_in_an_aborted_transaction() -> None:
    with pytest.raises(ValueError, match="fail_once"):
        FeedPlan(abort_every=4, fail_once_transaction=3)
    plan = FeedPlan()
    assert not plan.aborts(plan.fail_once_transaction)
    assert [n for n in range(8) if plan.aborts(n)] == [3, 7]
