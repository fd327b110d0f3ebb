"""The pool that keeps clients between tasks (:mod:`pyspark_kafka_txn.pool`).

What the readers' and writers' reuse relies on: a client is lent to one user at a time,
only for an equal key (credentials included), closed when its use raised, and never kept
beyond the pool's capacity, its idle time, or a fork. The clients here are plain objects
that record their closing; the pooled Kafka clients are tested against brokers in
``tests/reader/test_pooled_consumers.py`` and ``tests/writer/test_pooled_clients.py``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from pyspark_kafka_txn.pool import Pool


@dataclass(eq=False)
class Client:
    name: str
    closed: bool = False
    users: int = 0
    log: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.closed = True


def _pool(**kw: float) -> tuple[Pool[object, Client], list[Client]]:
    made: list[Client] = []
    pool: Pool[object, Client] = Pool(
        "test client",
        Client.close,
        capacity=int(kw.get("capacity", 4)),
        idle_s=kw.get("idle_s", 60.0),
    )
    return pool, made


def _maker(made: list[Client], name: str) -> Callable[[], Client]:
    def make() -> Client:
        client = Client(f"{name}-{len(made)}")
        made.append(client)
        return client

    return make


def test_a_client_is_reused_for_an_equal_key_and_never_for_another() -> None:
    pool, made = _pool()
    alice = ("broker:9092", ("SASL_SSL", "alice", "secret-1"))
    with pool.use(alice, _maker(made, "a")) as first:
        pass
    with pool.use(("broker:9092", ("SASL_SSL", "alice", "secret-1")), _maker(made, "a")) as again:
        assert again is first
    # Same user, another password: never the client signed in with the first one.
    with pool.use(("broker:9092", ("SASL_SSL", "alice", "secret-2")), _maker(made, "b")) as other:
        assert other is not first
    assert len(made) == 2
    assert not any(c.closed for c in made)
    assert pool.idle() == 2


def test_a_client_in_use_is_lent_to_no_one_else() -> None:
    pool, made = _pool()
    with pool.use("k", _maker(made, "a")) as first, pool.use("k", _maker(made, "a")) as second:
        assert first is not second
    assert pool.idle() == 2  # both kept once returned


def test_a_client_whose_use_raised_is_closed_not_kept() -> None:
    pool, made = _pool()
    with pytest.raises(RuntimeError), pool.use("k", _maker(made, "a")):
        raise RuntimeError("the broker went away")
    assert made[0].closed
    assert pool.idle() == 0
    with pool.use("k", _maker(made, "a")) as fresh:
        assert fresh is not made[0]


def test_capacity_closes_the_least_recently_returned() -> None:
    pool, made = _pool(capacity=2)
    with (
        pool.use("a", _maker(made, "a")),
        pool.use("b", _maker(made, "b")),
        pool.use("c", _maker(made, "c")),
    ):
        pass  # returned in the order c, b, a
    assert [c.closed for c in made] == [False, False, True]
    assert pool.idle() == 2


def test_an_idle_client_expires() -> None:
    pool, made = _pool(idle_s=0.05)
    with pool.use("k", _maker(made, "a")):
        pass
    deadline = time.monotonic() + 30  # hang guard only
    while pool.idle() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert made[0].closed
    with pool.use("k", _maker(made, "a")) as fresh:
        assert fresh is not made[0]


def test_discard_and_close_all() -> None:
    pool, made = _pool()
    for key in ("a", "a", "b"):
        with pool.use(key, _maker(made, key)):
            pass
    assert pool.discard("a") == 1  # one client of "a" was made and kept
    assert pool.idle() == 1
    pool.close_all()
    assert all(c.closed for c in made)
    assert pool.idle() == 0


def test_threads_never_share_a_client() -> None:
    pool, made = _pool(capacity=8)
    lock = threading.Lock()
    shared: list[str] = []

    def work() -> None:
        for _ in range(200):
            with pool.use("k", _maker(made, "t")) as client:
                with lock:
                    client.users += 1
                    if client.users > 1:
                        shared.append(client.name)
                time.sleep(0)
                with lock:
                    client.users -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not shared
    assert len(made) <= 4  # reused: at most one per thread at once


def test_a_forked_child_does_not_use_its_parents_clients() -> None:
    pool, made = _pool()
    with pool.use("k", _maker(made, "parent")):
        pass
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports whether it got the parent's client
        try:
            with pool.use("k", _maker(made, "child")) as client:
                os.write(write, client.name.encode())
        finally:
            os._exit(0)
    os.close(write)
    name = os.read(read, 100).decode()
    os.waitpid(pid, 0)
    assert name.startswith("child"), name
    assert pool.idle() == 1 and not made[0].closed  # the parent's client is still its own
