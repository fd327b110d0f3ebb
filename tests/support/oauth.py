"""OAUTHBEARER test kit: unsecured JWTs, token providers, a local OIDC token endpoint.

The providers are importable as ``tests.support.oauth:<name>`` (the form
``kafka.sasl.oauthbearer.token.provider`` takes), so Spark's Python workers can call them.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: The principal the providers' tokens name (``User:alice``).
SUBJECT = "alice"


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured_jwt(sub: str | None = SUBJECT, lifetime_s: float = 300.0, **claims: object) -> str:
    """An unsecured JWT (alg none, empty signature) for ``sub``, expiring in ``lifetime_s``."""
    now = time.time()
    body: dict[str, object] = {"iat": int(now), "exp": int(now + lifetime_s), **claims}
    if sub is not None:
        body["sub"] = sub
    return f"{_b64({'alg': 'none'})}.{_b64(body)}."


def alice_token() -> tuple[str, float]:
    """Provider: a fresh token for alice and its expiry (seconds since the epoch)."""
    return unsecured_jwt(SUBJECT), time.time() + 300


def admin_token() -> tuple[str, float]:
    """Provider: a fresh token for admin (a super user where an authorizer runs)."""
    return unsecured_jwt("admin"), time.time() + 300


def alice_token_ms() -> tuple[str, int]:
    """Provider: as :func:`alice_token`, expiry in milliseconds (as the MSK signer)."""
    return unsecured_jwt(SUBJECT), int((time.time() + 300) * 1000)


def alice_token_only() -> str:
    """Provider: the token alone (no expiry)."""
    return unsecured_jwt(SUBJECT)


def expired_token() -> str:
    """Provider: a token that expired a minute ago."""
    return unsecured_jwt(SUBJECT, lifetime_s=-60)


def failing_provider() -> str:
    """Provider: fails with a message holding a secret-looking text."""
    raise RuntimeError("provider-internal-secret-xyz")


@dataclass
class TokenEndpoint:
    """A local OIDC token endpoint (client credentials grant) issuing unsecured JWTs.

    Attributes
    ----------
    url
        Where to POST.
    client_id, client_secret
        The only credentials it accepts (HTTP basic, form-encoded as RFC 6749 says).
    requests
        The form fields of every request (secrets excluded).
    """

    url: str
    client_id: str
    client_secret: str = field(repr=False)
    lifetime_s: float = 300.0
    requests: list[dict[str, str]] = field(default_factory=list)
    issued: list[str] = field(default_factory=list, repr=False)


@contextmanager
def token_endpoint(
    client_id: str, client_secret: str, sub: str = SUBJECT
) -> Iterator[TokenEndpoint]:
    """Serve a :class:`TokenEndpoint` on 127.0.0.1 in a thread while the context lasts."""
    state: list[TokenEndpoint] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            endpoint = state[0]
            length = int(self.headers.get("Content-Length", "0"))
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            endpoint.requests.append(form)
            auth = self.headers.get("Authorization", "")
            expected = ":".join(
                urllib.parse.quote_plus(p) for p in (endpoint.client_id, endpoint.client_secret)
            )
            good = auth == "Basic " + base64.b64encode(expected.encode()).decode()
            if not good or form.get("grant_type") != "client_credentials":
                self._answer(401, {"error": "invalid_client"})
                return
            token = unsecured_jwt(sub, endpoint.lifetime_s, scope=form.get("scope", ""))
            endpoint.issued.append(token)
            self._answer(
                200,
                {
                    "access_token": token,
                    "token_type": "Bearer",
                    "expires_in": int(endpoint.lifetime_s),
                },
            )

        def _answer(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host, port = server.server_address[:2]
    state.append(TokenEndpoint(f"http://{host!s}:{port}/token", client_id, client_secret))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def oauth_jaas(client_id: str, client_secret: str, scope: str | None = None) -> str:
    """Kafka's KIP-768 JAAS line for client credentials."""
    extra = f' scope="{scope}"' if scope else ""
    return (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="{client_id}" clientSecret="{client_secret}"{extra};'
    )
