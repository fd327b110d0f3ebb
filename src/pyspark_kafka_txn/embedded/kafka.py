"""``EmbeddedKafka``: the embedded cluster as a context manager running in a thread."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from pyspark_kafka_txn.embedded.cluster import Cluster
from pyspark_kafka_txn.embedded.config import ClusterConfig
from pyspark_kafka_txn.embedded.faults import FaultAction, FaultRule
from pyspark_kafka_txn.embedded.handlers import APIS, apis_for
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.embedded.server import BrokerServer
from pyspark_kafka_txn.wire import COORDINATOR_GROUP, COORDINATOR_TXN

logger = logging.getLogger(__name__)

T = TypeVar("T")
_START_TIMEOUT_S = 30.0


def _api_key(api: int | str) -> int:
    if isinstance(api, int):
        if api not in APIS:
            raise ValueError(f"API key {api} is not served by the embedded cluster")
        return api
    for spec in APIS.values():
        if spec.name.lower() == api.lower():
            return spec.api_key
    raise ValueError(f"unknown API {api!r}; known: {sorted(s.name for s in APIS.values())}")


def _error_code(error: ErrorCode | int | str) -> ErrorCode:
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, int):
        return ErrorCode(error)
    try:
        return ErrorCode[error.lower()]
    except KeyError:
        raise ValueError(f"unknown Kafka error code {error!r}") from None


class EmbeddedKafka:
    """A Kafka-wire-compatible cluster in this process, for tests, demos and notebooks.

    Parameters
    ----------
    brokers
        Number of broker nodes, each listening on its own port.
    data_dir
        Directory for the logs, the transaction log and group offsets; ``None`` keeps
        state in memory only.
    **settings
        Any other :class:`~pyspark_kafka_txn.embedded.config.ClusterConfig` field, e.g.
        ``port=9092`` or ``transaction_version=1``.

    Examples
    --------
    >>> with EmbeddedKafka() as kafka:  # doctest: +SKIP
    ...     kafka.create_topic("events", partitions=3)
    ...     print(kafka.bootstrap_servers)
    """

    def __init__(
        self, brokers: int = 1, data_dir: str | Path | None = None, **settings: Any
    ) -> None:
        self.config = ClusterConfig(
            brokers=brokers, data_dir=Path(data_dir) if data_dir is not None else None, **settings
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._cluster: Cluster | None = None
        self._servers: dict[int, BrokerServer] = {}
        self._ports: dict[int, int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> EmbeddedKafka:
        """Start the event-loop thread and every broker; return ``self``."""
        if self._thread is not None:
            raise RuntimeError("EmbeddedKafka is already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="embedded-kafka", daemon=True)
        self._thread.start()
        try:
            self._run(self._start(), timeout=_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    async def _start(self) -> None:
        assert self._loop is not None
        cluster = Cluster(self.config, self._loop)
        self._cluster = cluster
        apis = apis_for(self.config)
        for node in cluster.node_ids:
            server = BrokerServer(cluster, node, apis)
            # After a restart every broker comes back on the port it had.
            port = self._ports.get(node) or (self.config.port + node if self.config.port else 0)
            self._ports[node] = await server.start(self.config.host, port)
            self._servers[node] = server
        self._tasks.append(asyncio.get_running_loop().create_task(self._housekeeping()))

    async def _housekeeping(self) -> None:
        assert self._cluster is not None
        cluster = self._cluster
        interval = self.config.transaction_abort_interval_ms / 1000
        try:
            while True:
                await asyncio.sleep(interval)
                try:
                    cluster.txn.abort_timed_out()
                except Exception:
                    logger.exception("transaction timeout check failed")
        finally:  # cancelled on stop: answer JoinGroup/SyncGroup requests still parked
            cluster.membership.close()

    def stop(self) -> None:
        """Stop every broker and the loop thread (state on disk is kept)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._cluster is not None and loop.is_running():
            try:
                self._run(self._stop(), timeout=10)
            except Exception:
                logger.exception("error while stopping the embedded cluster")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = None
        self._thread = None

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        for server in self._servers.values():
            await server.stop()
        # The servers aborted their connections: let the handlers (and waiting
        # JoinGroup/Fetch calls) finish by themselves, cancel what is still running after
        # a moment, so no task is destroyed while pending when the loop closes.
        current = asyncio.current_task()
        leftovers = [t for t in asyncio.all_tasks() if t is not current]
        if leftovers:
            _, pending = await asyncio.wait(leftovers, timeout=1.0)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._cluster is not None:
            self._cluster.close()

    def __enter__(self) -> EmbeddedKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- plumbing -----------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        if self._loop is None:
            raise RuntimeError("EmbeddedKafka is not started")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    def call(self, fn: Callable[[Cluster], T]) -> T:
        """Run ``fn(cluster)`` on the broker thread and return its result."""

        async def run() -> T:
            assert self._cluster is not None
            return fn(self._cluster)

        return self._run(run())

    @property
    def cluster(self) -> Cluster:
        """The cluster state (only touch it through :meth:`call`)."""
        if self._cluster is None:
            raise RuntimeError("EmbeddedKafka is not started")
        return self._cluster

    # --- public API ---------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the running brokers."""
        return ",".join(
            f"{self.config.advertised}:{port}"
            for node, port in sorted(self._ports.items())
            if self._cluster is not None and node in self._cluster.running
        )

    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None
    ) -> None:
        """Create a topic (raises ``TopicError`` if Kafka would refuse it)."""
        self.call(lambda c: c.create_topic(name, partitions, config))

    def add_partitions(self, name: str, count: int) -> None:
        """Grow a topic to ``count`` partitions, as CreatePartitions does."""
        self.call(lambda c: c.add_partitions(name, count))

    def delete_topic(self, name: str) -> None:
        """Delete a topic, its logs and its committed offsets."""
        self.call(lambda c: c.delete_topic(name))

    def offsets(self, topic: str, partition: int) -> dict[str, int]:
        """``log_start``, ``high_watermark`` and ``last_stable`` offsets of a partition."""

        def read(c: Cluster) -> dict[str, int]:
            log = c.partition(topic, partition)
            if log is None:
                raise KeyError(f"unknown partition {topic}-{partition}")
            return {
                "log_start": log.log_start_offset,
                "high_watermark": log.high_watermark,
                "last_stable": log.last_stable_offset,
            }

        return self.call(read)

    # --- fault injection ----------------------------------------------------------

    def fail_requests(
        self,
        api: int | str,
        error: ErrorCode | int | str,
        *,
        count: int = 1,
        node: int | None = None,
        after: bool = False,
        transactional_id_prefix: str | None = None,
    ) -> FaultRule:
        """Answer the next ``count`` requests of ``api`` with ``error``.

        With ``after=False`` the request is not executed; with ``after=True`` it is
        executed and only its answer carries the error (a lost acknowledgement). With
        ``transactional_id_prefix`` only requests whose ``transactional_id`` starts with
        it match (one application's transactions among several; for a request without a
        transactional id, such as OffsetCommit, its group id).

        Raises
        ------
        ValueError
            For ``after=False`` on an API without an error response builder
            (``ApiSpec.error_response``), or for an unknown API or error code.
        """
        key = _api_key(api)
        if not after and APIS[key].error_response is None:
            raise ValueError(
                f"{APIS[key].name} has no error response builder: use after=True (the "
                "request is executed and only its answer carries the error)"
            )
        action = FaultAction.ERROR_AFTER if after else FaultAction.ERROR
        return self.cluster.faults.add(
            FaultRule(
                action,
                key,
                node=node,
                error=_error_code(error),
                remaining=count,
                transactional_id_prefix=transactional_id_prefix,
            )
        )

    def delay_requests(
        self,
        api: int | str,
        seconds: float,
        *,
        count: int = 1,
        node: int | None = None,
        transactional_id_prefix: str | None = None,
    ) -> FaultRule:
        """Delay the next ``count`` requests of ``api`` by ``seconds`` (with
        ``transactional_id_prefix``, only those :meth:`fail_requests` would match)."""
        return self.cluster.faults.add(
            FaultRule(
                FaultAction.DELAY,
                _api_key(api),
                node=node,
                delay_s=seconds,
                remaining=count,
                transactional_id_prefix=transactional_id_prefix,
            )
        )

    def drop_requests(
        self, api: int | str, *, count: int = 1, node: int | None = None, after: bool = False
    ) -> FaultRule:
        """Close the connection on the next ``count`` requests of ``api``.

        ``after=True`` executes the request first (the client never sees the answer).
        """
        action = FaultAction.DROP_AFTER if after else FaultAction.DROP
        return self.cluster.faults.add(FaultRule(action, _api_key(api), node=node, remaining=count))

    def clear_faults(self) -> None:
        """Disarm every pending fault rule."""
        self.cluster.faults.clear()

    def drop_connections(self, node: int | None = None) -> int:
        """Abort every client connection (of one node, or all); return how many."""

        async def drop() -> int:
            servers = self._servers.values() if node is None else [self._servers[node]]
            return sum(s.drop_connections() for s in servers)

        return self._run(drop())

    def set_marker_delay(self, seconds: float) -> None:
        """Delay transaction markers after EndTxn, widening the Prepare* window."""

        def apply(c: Cluster) -> None:
            c.txn.marker_delay_s = seconds

        self.call(apply)

    def move_leader(self, topic: str, partition: int, node: int) -> None:
        """Make ``node`` the leader of a partition (bumps its leader epoch)."""
        self._check_node(node)
        self.call(lambda c: c.move_leader(topic, partition, node))

    def move_coordinator(
        self, kind: str, key: str, node: int, *, unowned_s: float = 0.0, loading_s: float = 0.0
    ) -> None:
        """Move the ``"group"`` or ``"transaction"`` coordinator of ``key`` to ``node``.

        Parameters
        ----------
        kind
            ``"group"`` or ``"transaction"``.
        key
            The group id or transactional id (its whole partition moves).
        node
            The new coordinator.
        unowned_s, loading_s
            A transaction coordinator's move as a handover, as Apache Kafka makes it when
            a ``__transaction_state`` partition changes leader: FindCoordinator names
            ``node`` at once, but for ``unowned_s`` seconds no node owns the partition
            (requests for its ids get NOT_COORDINATOR everywhere, ListTransactions lists
            them nowhere, without an error), then ``node`` loads it for ``loading_s``
            seconds (COORDINATOR_LOAD_IN_PROGRESS for its ids, and for ListTransactions
            on ``node``). Its transactions in PrepareCommit/PrepareAbort are completed
            only once loaded. Default: the move is immediate.

        Raises
        ------
        ValueError
            For an unknown ``kind`` or node, or a handover of a group coordinator.
        """
        self._check_node(node)
        key_type = {"group": COORDINATOR_GROUP, "transaction": COORDINATOR_TXN}.get(kind)
        if key_type is None:
            raise ValueError(f"kind must be 'group' or 'transaction', got {kind!r}")
        if key_type != COORDINATOR_TXN and (unowned_s > 0 or loading_s > 0):
            raise ValueError("a coordinator handover is modelled for transactions only")
        self.call(
            lambda c: c.move_coordinator(
                key_type, key, node, unowned_s=unowned_s, loading_s=loading_s
            )
        )

    def stop_broker(self, node: int) -> None:
        """Stop one broker: its listener closes and its connections drop."""
        self._check_node(node)
        self._run(self._servers[node].stop())

    def start_broker(self, node: int) -> None:
        """Start a stopped broker again on the same port."""
        self._check_node(node)
        self._run(self._servers[node].start(self.config.host, self._ports[node]))

    def restart(self) -> None:
        """Stop the whole cluster and start it again on the same ports.

        Everything is recovered from the data directory, as after a crash (appends are
        written as they happen, so a clean stop persists nothing more than ``kill -9``
        would): open transactions are aborted at their timeout, PrepareCommit/Abort
        ones are completed, and clients reconnect to the same addresses.

        Raises
        ------
        RuntimeError
            Without a data directory (a restart would lose every topic and record).
        """
        if self.config.data_dir is None:
            raise RuntimeError("restart() needs a data_dir: in-memory state would be lost")
        self.stop()
        self.start()

    def restart_broker(self, node: int) -> None:
        """Stop and start one broker (cluster state is kept in memory; see :meth:`restart`
        for a restart that recovers from the data directory)."""
        self.stop_broker(node)
        self.start_broker(node)

    def _check_node(self, node: int) -> None:
        if node not in self._servers:
            raise ValueError(f"no broker {node}; brokers are {sorted(self._servers)}")
