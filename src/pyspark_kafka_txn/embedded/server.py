"""One broker node: a TCP listener speaking the Kafka protocol.

Requests of one connection are handled one at a time, in order (Kafka mutes a channel
until its response is sent), which also keeps responses in correlation-id order for
pipelining clients. Unsupported API keys or versions close the connection, as Kafka's
``SocketServer`` does, except ApiVersions, which gets the KIP-511 v0 fallback. A TLS
handshake that fails (e.g. a missing or untrusted client certificate) is answered with
OpenSSL's alert before the connection closes, as Kafka's ``SslTransportLayer`` does.

The accept loop is the server's own rather than ``loop.create_server``'s: every accepted
socket is tracked from the moment ``accept`` returns it, and every transport from the
moment it exists, so stopping the broker closes all of them — also connections accepted
an instant before, whose transport asyncio had not built yet (``create_server`` leaves
those to the garbage collector when the loop stops, as "unclosed transport" warnings).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import socket
import ssl
import struct
from asyncio import sslproto
from collections.abc import Callable
from typing import Any, cast

from pyspark_kafka_txn.embedded.cluster import Cluster
from pyspark_kafka_txn.embedded.dispatch import ApiSpec, Context, NoResponse
from pyspark_kafka_txn.embedded.faults import FaultAction, FaultRule
from pyspark_kafka_txn.embedded.protocol import (
    ErrorCode,
    ProtocolDecodeError,
    build,
    decode_request,
    encode_response,
    peek_header,
    response_module,
)
from pyspark_kafka_txn.embedded.security import (
    Authenticator,
    SaslAuthenticationError,
    Session,
    certificate_principal,
)
from pyspark_kafka_txn.wire import API_VERSIONS, PRE_AUTH_APIS

logger = logging.getLogger(__name__)

# Before SASL authentication only these may be sent (ApiVersions, SaslHandshake,
# SaslAuthenticate), and frames are capped as Kafka's ``sasl.server.max.receive.size``.
_MAX_UNAUTHENTICATED_FRAME = 524_288
MAX_FRAME = 100 * 1024 * 1024  # socket.request.max.bytes
_STREAM_LIMIT = 16 * 1024 * 1024
_ACCEPT_BATCH = 128  # connections accepted per readiness event (asyncio's backlog default)
_ACCEPT_PAUSE_S = 1.0  # after a failed accept (out of file descriptors)


class _CloseConnectionError(Exception):
    """Close the connection without answering."""


class _TlsListenerProtocol(sslproto.SSLProtocol):
    """asyncio's server-side TLS protocol, sending the alert of a failed handshake.

    On a failed handshake asyncio closes the socket without writing out what OpenSSL
    left in its outgoing buffer: the alert (``certificate_required``, ``unknown_ca``,
    ...) that tells the client why. Without it clients see a plain disconnect and retry
    (librdkafka forever); with it they report an SSL error, as against Kafka.
    """

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        transport = self._transport
        if isinstance(handshake_exc, ssl.SSLError) and isinstance(
            transport, asyncio.WriteTransport
        ):
            peer = transport.get_extra_info("peername")
            address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
            reason = handshake_exc.reason or type(handshake_exc).__name__
            if isinstance(handshake_exc, ssl.SSLCertVerificationError):
                reason = f"{reason}: {handshake_exc.verify_message}"
            # INFO, as Kafka logs "Failed authentication with /<address> (SSL handshake failed)"
            logger.info("closing connection from %s: TLS handshake failed (%s)", address, reason)
            outgoing = getattr(self, "_outgoing", None)  # the MemoryBIO OpenSSL writes to
            if isinstance(outgoing, ssl.MemoryBIO) and outgoing.pending:
                # Nothing is queued before it (the client has read our handshake messages),
                # so it is sent now, before super() force-closes the transport.
                transport.write(outgoing.read())
        super()._on_handshake_complete(handshake_exc)


def _replace_errors(body: Any, code: ErrorCode) -> Any:
    """Copy of a response entity with every error code set to ``code``."""
    if isinstance(body, tuple):
        return tuple(_replace_errors(item, code) for item in body)
    if not dataclasses.is_dataclass(body) or isinstance(body, type):
        return body
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(body):
        value = getattr(body, f.name)
        if f.name.endswith("error_code") and isinstance(value, ErrorCode):
            changes[f.name] = code
        elif isinstance(value, tuple) or dataclasses.is_dataclass(value):
            changes[f.name] = _replace_errors(value, code)
    return dataclasses.replace(body, **changes)


class BrokerServer:
    """The listener of broker ``node_id``."""

    def __init__(self, cluster: Cluster, node_id: int, apis: dict[int, ApiSpec]) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.apis = apis
        self._listener: socket.socket | None = None
        #: Accepted sockets whose transport is being built.
        self._accepted: set[socket.socket] = set()
        #: Every connection's transport, until it closes.
        self._transports: set[asyncio.Transport] = set()
        self._adopting: set[asyncio.Task[None]] = set()
        self._authenticator = Authenticator(cluster.config.security, cluster.scram)

    async def start(self, host: str, port: int) -> int:
        # With asyncio's 64 KiB default the stream pauses and resumes reading every
        # 128 KiB of a megabyte-sized Produce frame; 16 MiB saves 20-30 % of read CPU.
        loop = asyncio.get_running_loop()
        context = self.cluster.config.security.ssl_context()

        def connection() -> asyncio.BaseProtocol:
            # What asyncio.start_server(ssl=context) builds, with our TLS protocol.
            reader = asyncio.StreamReader(limit=_STREAM_LIMIT, loop=loop)
            stream = asyncio.StreamReaderProtocol(reader, self._serve, loop=loop)
            if context is None:
                return stream
            no_waiter = cast("asyncio.Future[Any]", None)  # server side: nobody awaits it
            return _TlsListenerProtocol(loop, stream, context, no_waiter, server_side=True)

        family, _, _, _, address = (
            await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        )[0]
        listener = socket.create_server(address, family=family, backlog=128)
        listener.setblocking(False)
        self._listener = listener
        self._listen(listener, connection)
        bound = int(listener.getsockname()[1])
        advertised = self.cluster.config.advertised
        self.cluster.addresses[self.node_id] = (advertised, bound)
        self.cluster.running.add(self.node_id)
        logger.info(
            "broker %d listening on %s:%d, advertised as %s:%d",
            self.node_id,
            host,
            bound,
            advertised,
            bound,
        )
        return bound

    def _on_readable(
        self, listener: socket.socket, protocol: Callable[[], asyncio.BaseProtocol]
    ) -> None:
        """Accept what is pending; each socket is tracked before anything else happens."""
        loop = asyncio.get_running_loop()
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: pause a moment, as asyncio's server does
                logger.warning("broker %d: accept failed: %s", self.node_id, exc)
                loop.remove_reader(listener.fileno())
                loop.call_later(_ACCEPT_PAUSE_S, self._listen, listener, protocol)
                return
            self._accepted.add(sock)
            sock.setblocking(False)
            # asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, which an
            # accepted socket of socket.create_server() (proto 0) is not: without it,
            # Nagle's algorithm holds pipelined answers back by ~40 ms each.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._adopt(sock, protocol))
            self._adopting.add(task)
            task.add_done_callback(self._adopting.discard)

    def _listen(
        self, listener: socket.socket, protocol: Callable[[], asyncio.BaseProtocol]
    ) -> None:
        if self._listener is listener:  # not stopped meanwhile
            asyncio.get_running_loop().add_reader(
                listener.fileno(), self._on_readable, listener, protocol
            )

    async def _adopt(
        self, sock: socket.socket, protocol: Callable[[], asyncio.BaseProtocol]
    ) -> None:
        """Build the connection's transport; on failure or cancellation close the socket."""
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.connect_accepted_socket(protocol, sock=sock)
        except asyncio.CancelledError:
            sock.close()
            raise
        except OSError:
            sock.close()
            return
        finally:
            self._accepted.discard(sock)
        # Forget the connections that have ended since the last one came.
        self._transports = {t for t in self._transports if not t.is_closing()}
        if not transport.is_closing():
            self._transports.add(transport)

    async def stop(self) -> None:
        self.cluster.running.discard(self.node_id)
        if self._listener is not None:
            asyncio.get_running_loop().remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
        for task in list(self._adopting):
            task.cancel()
        await asyncio.gather(*self._adopting, return_exceptions=True)
        for sock in list(self._accepted):
            sock.close()
        self._accepted.clear()
        self.drop_connections()
        await asyncio.sleep(0)  # the aborted transports' connection_lost callbacks run
        self.cluster.notifier.fire()

    def drop_connections(self) -> int:
        """Abort every open connection; return how many there were."""
        transports = [t for t in self._transports if not t.is_closing()]
        for transport in list(self._transports):
            transport.abort()
        self._transports.clear()
        return len(transports)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = Session(self._authenticator)
        peer = writer.get_extra_info("peername")
        session.host = peer[0] if isinstance(peer, tuple) else ""
        tls_principal = certificate_principal(writer.get_extra_info("peercert"))
        if tls_principal is not None:
            session.principal = tls_principal
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                limit = MAX_FRAME if not session.needs_auth else _MAX_UNAUTHENTICATED_FRAME
                if size < 0 or size > limit:
                    logger.warning("closing connection: frame size %d", size)
                    return
                frame = await reader.readexactly(size)
                response: bytes | None
                if session.raw_tokens and session.needs_auth:
                    response = self._raw_sasl(session, frame)
                else:
                    response = await self._handle(frame, session)
                if response is not None:
                    writer.write(response)
                    await writer.drain()
                if session.close_after_response:
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, _CloseConnectionError):
            pass
        except asyncio.CancelledError:
            # Shutdown: end quietly (Python 3.11's start_server callback would log a
            # cancelled connection task as an error).
            pass
        finally:
            writer.transport.abort()

    @staticmethod
    def _raw_sasl(session: Session, token: bytes) -> bytes:
        """One raw SASL token after SaslHandshake v0 (no Kafka framing)."""
        assert session.mechanism is not None
        try:
            answer, done = session.mechanism.step(token)
        except SaslAuthenticationError as exc:
            logger.info("SASL/%s authentication failed: %s", session.mechanism_name, exc)
            raise _CloseConnectionError from exc
        if done:
            session.complete()
        return struct.pack(">i", len(answer)) + answer

    def _spec_for(self, api_key: int, version: int, session: Session) -> ApiSpec:
        """The served API of a request; closes the connection as Kafka would if none."""
        if session.needs_auth and api_key not in PRE_AUTH_APIS:
            logger.warning("closing connection: api key %d before SASL authentication", api_key)
            raise _CloseConnectionError
        spec = self.apis.get(api_key)
        if spec is None:
            logger.warning("closing connection: unsupported api key %d", api_key)
            raise _CloseConnectionError
        return spec

    async def _handle(self, frame: bytes, session: Session) -> bytes | None:
        api_key, version, correlation_id = peek_header(frame)
        spec = self._spec_for(api_key, version, session)
        if not spec.accepts(version):
            if api_key == API_VERSIONS and version > spec.max_version:
                return self._api_versions_fallback(spec, correlation_id)
            logger.warning("closing connection: %s v%d is not supported", spec.name, version)
            raise _CloseConnectionError
        try:
            request = decode_request(frame)
        except ProtocolDecodeError as exc:
            logger.warning("closing connection: %s", exc)
            raise _CloseConnectionError from exc
        fault = self.cluster.faults.take(api_key, self.node_id, request.body)
        ctx = Context(
            self.cluster, self.node_id, api_key, version, request.client_id, self.apis, session
        )
        if fault is not None:
            early = await self._apply_fault_before(fault, ctx, spec, request.body)
            if early is not None:
                return encode_response(api_key, version, correlation_id, early)
        try:
            body = spec.handler(ctx, request.body)
            if inspect.isawaitable(body):
                body = await body
        except Exception as exc:
            self.cluster.internal_errors.append(f"{spec.name} v{version}: {exc!r}")
            logger.exception("%s v%d failed; closing the connection", spec.name, version)
            raise _CloseConnectionError from exc
        if fault is not None:
            body = self._apply_fault_after(fault, spec, body)
        if isinstance(body, NoResponse):
            if body.close:
                raise _CloseConnectionError
            return None
        logger.debug("api=%s v%d corr=%d", spec.name, version, correlation_id)
        try:
            return encode_response(api_key, version, correlation_id, body)
        except Exception as exc:
            self.cluster.internal_errors.append(f"encoding {spec.name} v{version}: {exc!r}")
            logger.exception("cannot encode %s v%d; closing the connection", spec.name, version)
            raise _CloseConnectionError from exc

    @staticmethod
    def _apply_fault_after(fault: FaultRule, spec: ApiSpec, body: Any) -> Any:
        if fault.action is FaultAction.DROP_AFTER:
            logger.info("fault: %s executed, connection dropped before the answer", spec.name)
            raise _CloseConnectionError
        if fault.action is FaultAction.ERROR_AFTER:
            if isinstance(body, NoResponse):  # acks=0: a failed produce closes the channel
                raise _CloseConnectionError
            return _replace_errors(body, fault.error)
        return body

    async def _apply_fault_before(
        self, fault: FaultRule, ctx: Context, spec: ApiSpec, body: Any
    ) -> Any:
        if fault.action is FaultAction.DELAY:
            await asyncio.sleep(fault.delay_s)
            if self.node_id not in self.cluster.running:  # stopped meanwhile: never executed
                raise _CloseConnectionError
            return None
        if fault.action is FaultAction.DROP:
            logger.info("fault: %s dropped with its connection", spec.name)
            raise _CloseConnectionError
        if fault.action is FaultAction.ERROR:
            if spec.error_response is None:
                # Refused when armed (EmbeddedKafka.fail_requests); never execute silently.
                logger.warning("no error response for %s; closing the connection", spec.name)
                raise _CloseConnectionError
            if getattr(body, "acks", None) == 0:  # Produce acks=0 gets no answer: close
                raise _CloseConnectionError
            logger.info("fault: %s answered with %s", spec.name, fault.error.name)
            return spec.error_response(ctx, body, fault.error)
        return None

    def _api_versions_fallback(self, spec: ApiSpec, correlation_id: int) -> bytes:
        mod = response_module(API_VERSIONS, 0)
        body = build(
            mod.ApiVersionsResponse,
            error_code=ErrorCode.unsupported_version,
            api_keys=(
                build(
                    mod.ApiVersion,
                    api_key=API_VERSIONS,
                    min_version=spec.min_version,
                    max_version=spec.max_version,
                ),
            ),
        )
        return encode_response(API_VERSIONS, 0, correlation_id, body)
