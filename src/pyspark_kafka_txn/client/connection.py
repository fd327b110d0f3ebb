"""One blocking TCP connection to one broker, with pipelining.

The API is synchronous on purpose: Spark's Python workers and the driver call it from
plain threads. Throughput comes from pipelining instead of concurrency: :meth:`Connection.send`
writes a request and returns its correlation id at once, :meth:`Connection.receive` blocks
for the response of a given id. Kafka answers the requests of one connection in order, so
responses that arrive before the one asked for are kept until claimed.

kio encodes every request (header + body) and decodes every response (header + body).
Response headers follow the flexible-version rule except for ApiVersions, which is always
answered with header v0; kio's ``__header_schema__`` already encodes that.

SASL sessions with a lifetime (KIP-368: a broker's ``connections.max.reauth.ms``, or a
token that expires) are renewed between requests: once half the lifetime has passed, the
next :meth:`Connection.send` re-authenticates on the open connection, or reconnects if
the session already ended, since the broker closes a connection whose session ended.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import io
import logging
import random
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from pyspark_kafka_txn.client.errors import (
    AuthenticationError,
    BrokerError,
    KafkaConnectionError,
    ProtocolError,
)
from pyspark_kafka_txn.client.kerberos import GSSAPI, GssapiSession
from pyspark_kafka_txn.client.oauth import challenge_status, current_token, initial_response
from pyspark_kafka_txn.client.security import ScramClient, SecurityConfig
from pyspark_kafka_txn.kio_entities import build
from pyspark_kafka_txn.wire import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE

__all__ = [
    "Connection",
    "ConnectionConfig",
    "build",
    "request_entity",
]

logger = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CID = struct.Struct(">i")
_CID_ERR = struct.Struct(">ih")

_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _tls_failure(exc: ssl.SSLError) -> str:
    """What a failed TLS handshake says: the broker's alert or the certificate problem."""
    reason = exc.reason or str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"{reason}: {exc.verify_message} (the broker's certificate is not trusted)"
    if "_ALERT_" in reason:  # e.g. TLSV13_ALERT_CERTIFICATE_REQUIRED, TLSV1_ALERT_UNKNOWN_CA
        hint = ""
        if "CERTIFICATE" in reason or "UNKNOWN_CA" in reason or "HANDSHAKE_FAILURE" in reason:
            hint = " (client certificate missing or not trusted by the broker?)"
        return f"the broker sent the TLS alert {reason}{hint}"
    if reason in ("UNEXPECTED_EOF_WHILE_READING", "WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE"):
        return f"{reason} (a listener that does not speak TLS? check security.protocol)"
    return reason


def _reader(cls: type[Any]) -> Any:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = entity_reader(cls)
    return reader


def _writer(cls: type[Any]) -> Any:
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = entity_writer(cls)
    return writer


def request_entity(api_key: int, version: int, entity: str, /, **fields: Any) -> Any:
    """Build a nested kio request entity (e.g. ``"CreatableTopic"``) of one API version."""
    mod = load_payload_module(api_key, version, EntityType.request)
    return build(getattr(mod, entity), **fields)


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """Socket-level options shared by every connection of a client.

    Attributes
    ----------
    client_id
        Sent in every request header.
    request_timeout_s
        How long to wait for one response before the connection is declared broken.
    connect_timeout_s
        TCP connect timeout.
    reconnect_backoff_s, reconnect_backoff_max_s
        Exponential back-off (with jitter) between reconnect attempts to one broker.
    max_in_flight
        Requests allowed on the wire per connection before :meth:`Connection.send` waits.
    security
        TLS / SASL settings.
    """

    client_id: str = "pyspark-kafka-txn"
    request_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    reconnect_backoff_s: float = 0.05
    reconnect_backoff_max_s: float = 1.0
    max_in_flight: int = 5
    security: SecurityConfig = field(default_factory=SecurityConfig)


@dataclass(frozen=True, slots=True)
class _Pending:
    api_key: int
    version: int
    sent_at: float
    raw: bool = False


class Connection:
    """A connection to ``host:port`` that negotiates API versions on connect.

    Parameters
    ----------
    host, port
        Broker address.
    config
        Socket options.
    node_id
        Broker id this connection belongs to (-1 for a bootstrap address).
    """

    def __init__(self, host: str, port: int, config: ConnectionConfig, node_id: int = -1) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.config = config
        self._sock: socket.socket | None = None
        self._next_cid = 0
        self._pending: collections.OrderedDict[int, _Pending] = collections.OrderedDict()
        self._done: dict[int, Any] = {}
        self._failures = 0
        self._last_failure = 0.0
        # TLS 1.3 connection whose first response has not arrived yet (see _read_exact).
        self._tls_unconfirmed = False
        #: Broker's supported ranges per api key, filled by ApiVersions.
        self.api_ranges: dict[int, tuple[int, int]] = {}
        #: Finalized feature levels (e.g. ``transaction.version``) from ApiVersions v3+.
        self.finalized_features: dict[str, int] = {}
        # KIP-368: monotonic times at which the SASL session should be renewed on this
        # connection and at which the broker ends it (None: no lifetime was given).
        self._reauth_at: float | None = None
        self._session_end: float | None = None
        #: SASL re-authentications done on this connection's sockets (KIP-368).
        self.reauthentications = 0

    def __repr__(self) -> str:
        return f"Connection({self.host}:{self.port}, node={self.node_id})"

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether a socket is open."""
        return self._sock is not None

    def connect(self) -> None:
        """Open the socket (after back-off if the last attempt failed) and negotiate."""
        if self._sock is not None:
            return
        if self._failures:
            base = self.config.reconnect_backoff_s * (2 ** min(self._failures - 1, 10))
            delay = min(base, self.config.reconnect_backoff_max_s) * random.uniform(0.8, 1.2)
            wait = self._last_failure + delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        security = self.config.security
        raw: socket.socket | None = None
        try:
            raw = socket.create_connection(
                (self.host, self.port), timeout=self.config.connect_timeout_s
            )
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = raw
            if security.uses_tls:
                sock = security.ssl_context().wrap_socket(raw, server_hostname=self.host)
            sock.settimeout(self.config.request_timeout_s)
        except ssl.SSLError as exc:
            if raw is not None:
                raw.close()
            self._note_failure()
            error = AuthenticationError(
                f"TLS handshake with {self.host}:{self.port} failed: {_tls_failure(exc)}"
            )
            logger.warning("%s", error)
            raise error from None
        except OSError as exc:
            if raw is not None:
                raw.close()
            self._note_failure()
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._sock = sock
        self._pending.clear()
        self._done.clear()
        # With TLS 1.3 the client finishes its handshake before the broker has checked the
        # client certificate; a rejection shows up on the first read (as Kafka's
        # SslTransportLayer treats failures in its POST_HANDSHAKE state).
        self._tls_unconfirmed = isinstance(sock, ssl.SSLSocket) and sock.version() == "TLSv1.3"
        with self._closed_on_failure("%s"):
            self._negotiate()
            if security.uses_sasl:
                self._authenticate(security)
        self._failures = 0

    @contextlib.contextmanager
    def _closed_on_failure(self, auth_failed: str, *args: object) -> Iterator[None]:
        """Close the socket and count a failure when the block raises; an authentication
        failure (not retried) is logged first, with the format ``auth_failed`` of ``args``
        and the error, as the Java client logs its "failed authentication due to"."""
        try:
            yield
        except AuthenticationError as exc:
            logger.warning(auth_failed, *args, exc)
            self.close()
            self._note_failure()
            raise
        except BaseException:
            self.close()
            self._note_failure()
            raise

    def close(self) -> None:
        """Close the socket; requests still pending are lost."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
        self._pending.clear()
        self._done.clear()
        self._reauth_at = self._session_end = None

    def _note_failure(self) -> None:
        self._failures += 1
        self._last_failure = time.monotonic()

    def _tls_rejected(self, exc: ssl.SSLError | None) -> AuthenticationError:
        """The broker ended a TLS 1.3 connection before its first response.

        Not retried, like a failed TLS 1.2 handshake: the broker rejected the client
        certificate (missing, untrusted or expired), which it says with a TLS alert
        (``exc``); a close without one is taken the same way. :meth:`connect` closes
        the socket.
        """
        self._tls_unconfirmed = False
        if exc is not None:
            detail = _tls_failure(exc)
        else:
            detail = (
                "the broker closed the connection before answering the first request "
                "(client certificate missing or rejected?)"
            )
        return AuthenticationError(f"TLS handshake with {self.host}:{self.port} failed: {detail}")

    def _fail(self, message: str, exc: BaseException | None = None) -> KafkaConnectionError:
        logger.info("connection to %s:%s failed: %s", self.host, self.port, message)
        self.close()
        self._note_failure()
        err = KafkaConnectionError(f"{self.host}:{self.port}: {message}")
        if exc is not None:
            err.__cause__ = exc
        return err

    # -- versions ----------------------------------------------------------------------

    def _negotiate(self) -> None:
        body = self._roundtrip_api_versions(3)
        if body.error_code == ErrorCode.unsupported_version:
            body = self._roundtrip_api_versions(0)
        if body.error_code != ErrorCode.none:
            raise BrokerError(body.error_code, "ApiVersions")
        self.api_ranges = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys
        }
        self.finalized_features = {
            str(f.name): int(f.max_version_level) for f in getattr(body, "finalized_features", ())
        }

    def _authenticate(self, security: SecurityConfig) -> None:
        """SaslHandshake + SaslAuthenticate rounds (KIP-152); never logs secrets."""
        mechanism = security.sasl_mechanism
        body = self.request(SASL_HANDSHAKE, self.version(SASL_HANDSHAKE, 1, 1), mechanism=mechanism)
        if body.error_code != ErrorCode.none:
            raise AuthenticationError(
                f"SASL mechanism {mechanism} refused by {self.host}:{self.port} "
                f"(enabled: {', '.join(body.mechanisms)})"
            )
        version = self.version(SASL_AUTHENTICATE, 0, 2)
        user, password = security.username or "", security.password or ""
        started = time.monotonic()

        def step(token: bytes) -> bytes:
            resp = self.request(SASL_AUTHENTICATE, version, auth_bytes=token)
            if resp.error_code != ErrorCode.none:
                raise AuthenticationError(
                    f"SASL {mechanism} authentication to {self.host}:{self.port} failed: "
                    f"{resp.error_message or resp.error_code.name}"
                )
            self._note_session_lifetime(started, getattr(resp, "session_lifetime", None))
            return bytes(resp.auth_bytes)

        if mechanism == "PLAIN":
            step(b"\0" + user.encode() + b"\0" + password.encode())
            return
        if mechanism == GSSAPI:
            assert security.kerberos is not None  # SecurityConfig requires it
            session = GssapiSession(security.kerberos, self.host)
            answer: bytes | None = session.first_token()
            while answer is not None:
                answer = session.respond(step(answer))
            return
        if mechanism == "OAUTHBEARER":
            assert security.oauth is not None  # SecurityConfig requires it
            source = security.oauth.source
            try:
                token = current_token(security.oauth).value
                challenge = step(initial_response(token, "", security.oauth.extensions))
                if challenge:
                    # RFC 7628 3.2.2: an error challenge (JSON) is acknowledged with a lone
                    # %x01; the broker then fails the exchange.
                    step(b"\x01")
                    raise AuthenticationError(
                        f"SASL OAUTHBEARER authentication to {self.host}:{self.port} failed: "
                        + challenge_status(challenge)
                    )
            except AuthenticationError as exc:
                if str(exc).startswith("OAUTHBEARER:"):  # no token: said by client.oauth
                    raise
                raise AuthenticationError(
                    f"{exc} (the broker rejected the OAUTHBEARER token from the {source}: "
                    "expired, or not valid for this cluster)"
                ) from None
            return
        scram = ScramClient(mechanism, user, password)
        server_first = step(scram.first_message())
        server_final = step(scram.final_message(server_first))
        scram.verify_server_final(server_final)

    def _note_session_lifetime(self, started: float, lifetime: datetime.timedelta | None) -> None:
        """Remember when the SASL session ends (KIP-368, SaslAuthenticate v1+).

        A broker with ``connections.max.reauth.ms`` (or a token that expires) gives the
        session's lifetime, counted from when authentication began; past it the broker
        closes the connection at its next request other than SaslHandshake. The session
        is renewed by the first request after a random 45-55 % of the lifetime: earlier
        than Kafka's Java client (85-95 %), whose network thread renews idle connections
        too, since this client only acts when a request is sent.
        """
        if lifetime is None or lifetime <= datetime.timedelta(0):
            self._reauth_at = self._session_end = None
            return
        seconds = lifetime.total_seconds()
        self._session_end = started + seconds
        self._reauth_at = started + seconds * random.uniform(0.45, 0.55)

    def _renew_session(self) -> None:
        """Re-authenticate (KIP-368) or reconnect when the SASL session is about to end.

        Called by :meth:`send` between requests. The responses still due are read first
        (kept for :meth:`receive`), since a re-authentication must not interleave with
        other requests. Within the lifetime SaslHandshake and SaslAuthenticate are sent
        again on the open connection with a fresh credential (a current OAUTHBEARER
        token); past it, or on a broker that refuses, the connection is closed and
        opened again (nothing is pending then, so no request is lost).
        """
        if self._sock is None or self._reauth_at is None or time.monotonic() < self._reauth_at:
            return
        while len(self._pending) > len(self._done):
            self._receive_one()
        assert self._session_end is not None
        if time.monotonic() >= self._session_end - 0.05:
            logger.info(
                "SASL session to %s:%s ended before it was renewed: reconnecting",
                self.host,
                self.port,
            )
            self._reconnect_keeping_responses()
            return
        self._reauth_at = self._session_end = None
        with self._closed_on_failure(
            "SASL re-authentication to %s:%s failed: %s", self.host, self.port
        ):
            self._authenticate(self.config.security)
        self.reauthentications += 1
        logger.debug("re-authenticated the SASL session to %s:%s (KIP-368)", self.host, self.port)

    def _reconnect_keeping_responses(self) -> None:
        """Close and open the socket, keeping the responses already read for :meth:`receive`."""
        done = dict(self._done)
        pending = {cid: self._pending[cid] for cid in done}
        self.close()
        self.connect()
        self._done.update(done)
        self._pending.update(pending)

    def _roundtrip_api_versions(self, version: int) -> Any:
        req_cls = load_request_schema(API_VERSIONS, version)
        body = build(
            req_cls, client_software_name="pyspark-kafka-txn", client_software_version="0.1.0"
        )
        cid = self._send_raw(API_VERSIONS, version, req_cls, body)
        frame = self._read_frame()
        self._tls_unconfirmed = False
        got, error = _CID_ERR.unpack_from(frame, 0)
        if got != cid:
            raise ProtocolError(f"ApiVersions: correlation id {got}, expected {cid}")
        self._pending.pop(cid, None)
        if error == ErrorCode.unsupported_version.value:
            version = 0  # KIP-511: the broker answers with a v0 body
        resp_cls = load_response_schema(API_VERSIONS, version)
        value, _ = _reader(resp_cls)(frame, 4)
        return value

    def version(self, api_key: int, lowest: int, highest: int) -> int:
        """Highest version in ``[lowest, highest]`` the broker supports.

        Raises
        ------
        ProtocolError
            If the ranges do not overlap.
        """
        broker = self.api_ranges.get(api_key)
        if broker is None:
            raise ProtocolError(f"broker {self.host}:{self.port} does not support api {api_key}")
        top = min(highest, broker[1])
        if top < max(lowest, broker[0]):
            raise ProtocolError(
                f"api {api_key}: client versions {lowest}-{highest}, broker {broker[0]}-{broker[1]}"
            )
        return top

    # -- requests ----------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    def send(self, api_key: int, version: int, *, raw_response: bool = False, **fields: Any) -> int:
        """Encode and write a request; return its correlation id.

        Blocks for the oldest response first if ``max_in_flight`` requests are pending
        (that response is kept for :meth:`receive`). With ``raw_response`` the response
        body is not decoded by kio: :meth:`receive` returns ``(frame, body_offset)``,
        for responses kio cannot decode (e.g. -1 timestamps).
        """
        self.connect()
        self._renew_session()
        while len(self._pending) - len(self._done) >= self.config.max_in_flight:
            self._receive_one()
        req_cls = load_request_schema(api_key, version)
        cid = self._send_raw(api_key, version, req_cls, build(req_cls, **fields))
        if raw_response:
            self._pending[cid] = dataclasses.replace(self._pending[cid], raw=True)
        return cid

    def receive(self, correlation_id: int) -> Any:
        """Block until the response to ``correlation_id`` arrives; return its body.

        Raises
        ------
        KafkaConnectionError
            If the connection breaks or the response does not arrive within
            ``request_timeout_s``; every pending request is then lost.
        """
        while correlation_id not in self._done:
            if correlation_id not in self._pending:
                raise KafkaConnectionError(
                    f"{self.host}:{self.port}: request {correlation_id} was lost "
                    "with its connection"
                )
            self._receive_one()
        self._pending.pop(correlation_id, None)
        return self._done.pop(correlation_id)

    def request(
        self, api_key: int, version: int, *, raw_response: bool = False, **fields: Any
    ) -> Any:
        """Send one request and wait for its response body."""
        return self.receive(self.send(api_key, version, raw_response=raw_response, **fields))

    def _send_raw(self, api_key: int, version: int, req_cls: type[Any], body: Any) -> int:
        sock = self._sock
        if sock is None:
            raise KafkaConnectionError(f"{self.host}:{self.port}: not connected")
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        hdr_cls: Any = req_cls.__header_schema__
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        _writer(hdr_cls)(
            buf,
            hdr_cls(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=cid,
                client_id=self.config.client_id,
            ),
        )
        _writer(req_cls)(buf, body)
        view = buf.getbuffer()
        _SIZE.pack_into(view, 0, len(view) - 4)
        try:
            sock.sendall(view)
        except OSError as exc:
            raise self._fail(f"send failed: {exc}", exc) from exc
        finally:
            view.release()
        self._pending[cid] = _Pending(api_key, version, time.monotonic())
        return cid

    def _receive_one(self) -> None:
        frame = self._read_frame()
        (cid,) = _CID.unpack_from(frame, 0)
        pending = self._pending.get(cid)
        if pending is None or cid in self._done:
            raise self._fail(f"unexpected correlation id {cid}")
        resp_cls = load_response_schema(pending.api_key, pending.version)
        try:
            _, used = _reader(resp_cls.__header_schema__)(frame, 0)
            if pending.raw:
                self._done[cid] = (frame, used)
                return
            body, _ = _reader(resp_cls)(frame, used)
        except Exception as exc:  # kio raises KeyError/ValueError/SerialError
            self.close()
            raise ProtocolError(
                f"cannot decode response to api {pending.api_key} v{pending.version}: {exc!r}"
            ) from exc
        self._done[cid] = body

    def _read_frame(self) -> bytes:
        head = self._read_exact(4)
        (size,) = _SIZE.unpack(head)
        if size < 4 or size > 1 << 30:
            raise self._fail(f"bad frame size {size}")
        return bytes(self._read_exact(size))  # kio's reader wants read-only bytes

    def _read_exact(self, n: int) -> bytearray:
        sock = self._sock
        if sock is None:
            raise KafkaConnectionError(f"{self.host}:{self.port}: not connected")
        out = bytearray(n)
        view = memoryview(out)
        got = 0
        try:
            while got < n:
                k = sock.recv_into(view[got:])
                if k == 0:
                    if self._tls_unconfirmed:
                        raise self._tls_rejected(None)
                    raise self._fail("connection closed by the broker")
                got += k
        except TimeoutError as exc:
            raise self._fail("request timed out", exc) from exc
        except ssl.SSLError as exc:
            if self._tls_unconfirmed:
                raise self._tls_rejected(exc) from None
            raise self._fail(f"receive failed: {exc}", exc) from exc
        except OSError as exc:
            raise self._fail(f"receive failed: {exc}", exc) from exc
        finally:
            view.release()
        return out
