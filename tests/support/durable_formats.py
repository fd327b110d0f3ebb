"""Records of every durable format, exactly as the package wrote them (format 1 of each).

A later version of the package must read these (``docs/design.md``, "Durable formats"):
keep them when a format changes, and add the new format's records beside them.

The Kafka records were captured on 2026-11-26 from the code of commit 033fc1b (before the
formats were checked), against the embedded cluster: batch 7 of query :data:`QUERY`
written by two tasks (``write_task``) and committed (``commit_batch``) on topic
``fmt-out`` (2 partitions), prefix ``fixture-``; a withdrawn decision of the same batch
(``withdraw_decision``); the claim of an idempotent write (``start_app_write``,
``txnAppId`` ``fixture-app``, ``txnVersion`` 3). Each is the committed offset's metadata,
with its offset, as OffsetFetch returned it for partition ``fmt-out``/0. The offsets are
lines 3 of ``offsets/0`` and ``offsets/1`` of a checkpoint of ``kafka-txn demo pipeline``
(``spark.readStream.format("kafka_txn")``, Spark 4), as Spark wrote them.
"""

from __future__ import annotations

QUERY = "5f0c7a3e-1d2b-4c8a-9e6f-0a1b2c3d4e5f"
TOPIC = "fmt-out"
BATCH = 7

#: Group ``{prefix}{QUERY}-decision``: the header of the decision for batch 7 (slot 0).
DECISION_HEADER = '{"f":1,"b":7,"n":1,"s":0,"t":1795733262525,"c":863140248}'
#: Group ``{prefix}{QUERY}-decision-0-1``: the handle list (its only chunk).
DECISION_CHUNK = "0:1000:0:2,1:1001:0:2"
#: The handles it records: Spark partition → (producer id, epoch, transaction version).
DECISION_HANDLES = {0: (1000, 0, 2), 1: (1001, 0, 2)}
#: The header of the same decision withdrawn (nothing of it committed).
WITHDRAWN_HEADER = '{"f":1,"b":7,"n":0,"s":0,"t":1795733267097,"c":0,"x":1}'

#: Groups ``{prefix}{QUERY}-0`` and ``-1``: each task's batch marker (offset 7).
MARKERS = {0: '{"b": 7, "rows": 2, "w": 1}', 1: '{"b": 7, "rows": 3, "w": 1}'}

#: Group ``{prefix}{APP_QUERY}-writer``: the claim of version 3 (offset 3).
APP_QUERY = "app-831a4245-cd5d-5eb1-b9a1-649bfb6547a1"
CLAIM_RUN = "13dcf27eaa7a4eb2a7371c2ec51ab022"
CLAIM = '{"f":1,"r":"13dcf27eaa7a4eb2a7371c2ec51ab022","v":3,"t":1795733262538}'

#: Group ``{prefix}{QUERY}-alive``: the liveness lease, renewed at ``t`` with a lease of
#: 60 s (offset 0; captured on 2026-11-29 from ``renew_lease`` of commit after 370eb47).
LEASE = '{"f":1,"t":1795733262600,"l":60000}'

#: The reader's end offset of a query's first micro-batch, with its recorded start.
OFFSETS_FIRST = (
    '{"kafka-txn-orders": {"0": 25, "1": 34}, "@origin": {"kafka-txn-orders": {"0": 0, "1": 0}}}'
)
#: The reader's end offset of a later micro-batch: Spark's own shape.
OFFSETS = '{"kafka-txn-orders": {"0": 45, "1": 61}}'
