"""Request-level faults on a real broker: a TCP proxy that reads Kafka's request framing.

Apache Kafka cannot be told to stall or refuse a chosen request the way the embedded
cluster can. Each node of :class:`~tests.support.apache_kafka.cluster.ApacheKafka` therefore
has a second listener, ``PROXIED``, whose advertised address is a :class:`KafkaProxy` in
front of it: a client that bootstraps through the proxies learns the proxies' addresses from
Metadata (Kafka answers with the addresses of the listener a request came in on), so every
one of its connections passes through them, while other clients and the brokers themselves
talk to the broker directly.

The proxy forwards bytes unchanged. It splits the client's stream into requests (a 4-byte
size, then the header whose first field is the API key) and applies its rules by API key:

* :meth:`KafkaProxy.hold`: the request is not forwarded while the rule stands (nor anything
  after it on that connection, as with a broker that stopped answering); when the rule is
  :meth:`cleared <KafkaProxy.clear>`, what was held is discarded and its connection closed,
  never delivered late, so a killed client's request cannot reach the broker afterwards;
* :meth:`KafkaProxy.delay`: the request is forwarded after a pause;
* :meth:`KafkaProxy.lose_responses`: the request is forwarded and executed, but its answer
  never reaches the client: the proxy reads the broker's answers (a 4-byte size, then the
  correlation id), and on the one that answers the caught request it closes the connection
  instead of relaying it, as when a connection breaks after the broker acted.

:meth:`KafkaProxy.drop_connections` closes every connection through the proxy at once.
A rule's :attr:`Rule.hits` counts the requests it caught, so a test can wait for "the
driver has sent EndTxn" and prove that the fault happened.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class Rule:
    """Requests of one API key to hold back, delay, or forward and lose the answer of."""

    api_key: int
    delay_s: float | None  # None: hold until the rule is cleared (unless lose_response)
    count: int | None  # how many requests it catches (None: every one)
    hits: int = 0
    released: threading.Event = field(default_factory=threading.Event)
    #: Forward the request at once, then close its connection instead of relaying the answer.
    lose_response: bool = False

    def takes(self) -> bool:
        return self.count is None or self.hits < self.count


@dataclass(eq=False)
class _Link:
    """One client connection and its connection to the broker."""

    client: socket.socket
    upstream: socket.socket
    #: Correlation ids of forwarded requests whose answers must be lost.
    doomed: set[int] = field(default_factory=set)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class KafkaProxy:
    """Forward connections from ``port`` to ``upstream``, applying the rules per request."""

    def __init__(self, port: int, upstream: tuple[str, int]) -> None:
        self.port = port
        self.upstream = upstream
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", port))
        self._links: set[_Link] = set()
        self._closed = False
        threading.Thread(target=self._accept, name=f"kafka-proxy-{port}", daemon=True).start()

    # -- rules ------------------------------------------------------------------------

    def hold(self, api_key: int, count: int | None = None) -> Rule:
        """Hold back requests of ``api_key`` (``count`` of them, or all) until cleared."""
        return self._add(Rule(api_key, None, count))

    def delay(self, api_key: int, seconds: float, count: int | None = None) -> Rule:
        """Forward requests of ``api_key`` (``count`` of them, or all) after ``seconds``."""
        return self._add(Rule(api_key, seconds, count))

    def lose_responses(self, api_key: int, count: int | None = None) -> Rule:
        """Forward requests of ``api_key`` (``count`` of them, or all), but close each one's
        connection when its answer arrives instead of relaying it: the broker executed the
        request, the client never learns its outcome (and loses whatever else was in flight
        on that connection)."""
        return self._add(Rule(api_key, None, count, lose_response=True))

    def drop_connections(self) -> int:
        """Close every connection through the proxy (requests in flight get no answer);
        the number of client connections closed. New connections are accepted as before."""
        with self._lock:
            links = list(self._links)
        for link in links:
            self._close(link)
        return len(links)

    def _add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def release(self, rule: Rule) -> None:
        """Remove one rule (the others stand); the requests it holds are dropped with their
        connections, the ones it delays are forwarded now."""
        with self._lock:
            self._rules = [r for r in self._rules if r is not rule]
        rule.released.set()

    def clear(self) -> None:
        """Remove every rule; held requests are dropped with their connections."""
        with self._lock:
            rules, self._rules = self._rules, []
        for rule in rules:
            rule.released.set()

    def _match(self, api_key: int) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.api_key == api_key and rule.takes():
                    rule.hits += 1
                    return rule
        return None

    # -- forwarding ---------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link(client, upstream)
            with self._lock:
                self._links.add(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._replies, args=(link,), daemon=True).start()

    def _requests(self, link: _Link) -> None:
        try:
            while True:
                size = _recv_exact(link.client, 4)
                if size is None:
                    break
                body = _recv_exact(link.client, struct.unpack(">i", size)[0])
                if body is None:
                    break
                rule = self._match(struct.unpack(">h", body[:2])[0])
                if rule is not None and rule.lose_response:
                    # Marked before it is sent: the answer cannot overtake the mark.
                    with self._lock:
                        link.doomed.add(struct.unpack(">i", body[4:8])[0])
                elif rule is not None:
                    if rule.delay_s is None:
                        rule.released.wait()
                        break  # cleared: the held request is dropped, never delivered late
                    rule.released.wait(rule.delay_s)
                link.upstream.sendall(size + body)
        except OSError:
            pass
        finally:
            self._close(link)

    def _replies(self, link: _Link) -> None:
        try:
            while True:
                size = _recv_exact(link.upstream, 4)
                if size is None:
                    break
                body = _recv_exact(link.upstream, struct.unpack(">i", size)[0])
                if body is None:
                    break
                with self._lock:
                    lost = struct.unpack(">i", body[:4])[0] in link.doomed
                if lost:
                    break  # executed by the broker; the client never gets the answer
                link.client.sendall(size + body)
        except OSError:
            pass
        finally:
            self._close(link)

    def _close(self, link: _Link) -> None:
        for s in (link.client, link.upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self._lock:
            self._links.discard(link)

    def close(self) -> None:
        """Stop accepting, release every rule and close every connection."""
        self._closed = True
        self.clear()
        self._server.close()
        self.drop_connections()
