"""OAUTHBEARER without a broker: the embedded validator's rules, the RFC 7628 message,
token caching and expiry forms, and the ``kafka.*`` option translation (no secret shown).
"""

from __future__ import annotations

import base64
import json
import time

import pytest

from pyspark_kafka_txn.client.oauth import (
    OAuthConfig,
    OAuthToken,
    challenge_status,
    current_token,
    initial_response,
    librdkafka_oauth_cb,
)
from pyspark_kafka_txn.client.security import SecurityConfig
from pyspark_kafka_txn.embedded.oauth import OAuthBearerMechanism, unsecured_jwt
from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.common import redact
from pyspark_kafka_txn.options.kafka import (
    check_security,
    client_options,
    librdkafka_client_config,
    librdkafka_params,
)
from tests.support import oauth as kit

SECRET = "unit-oauth-secret-42"
JAAS = kit.oauth_jaas("cid", SECRET, scope="a b")


class RefusedError(Exception):
    pass


def _b64(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _jwt(header: object, claims: object, signature: str = "") -> str:
    return f"{_b64(header)}.{_b64(claims)}.{signature}"


NOW = 1_700_000_000.0
GOOD = {"sub": "alice", "exp": NOW + 60, "iat": NOW - 1}


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("a.b", "three dot-separated parts"),
        (_jwt({"alg": "none"}, GOOD, "c2ln"), "signed"),
        (_jwt({"alg": "HS256"}, GOOD), "alg none"),
        (_jwt({}, GOOD), "alg none"),
        ("!!!." + _b64(GOOD) + ".", "header is not base64url"),
        (_jwt({"alg": "none"}, ["not", "an", "object"]), "claims is not a JSON object"),
        (_jwt({"alg": "none"}, {**GOOD, "sub": " "}), "principal name"),
        (_jwt({"alg": "none"}, {**GOOD, "sub": 7}), "principal name"),
        (_jwt({"alg": "none"}, {"sub": "alice"}), "no expiration time"),
        (_jwt({"alg": "none"}, {**GOOD, "exp": "soon"}), "exp claim is not a number"),
        (_jwt({"alg": "none"}, {**GOOD, "exp": True}), "exp claim is not a number"),
        (_jwt({"alg": "none"}, {**GOOD, "exp": NOW}), "expired"),
        (_jwt({"alg": "none"}, {**GOOD, "iat": NOW + 30}), "iat claim lies in the future"),
        (_jwt({"alg": "none"}, {**GOOD, "nbf": NOW + 30}), "nbf claim lies in the future"),
    ],
)
def test_unsecured_jwt_rules(token: str, reason: str) -> None:
    with pytest.raises(RefusedError, match=reason) as info:
        unsecured_jwt(token, NOW, RefusedError)
    assert token not in str(info.value)


def test_mechanism_accepts_a_valid_token_and_names_its_subject() -> None:
    token = _jwt({"alg": "none"}, GOOD)
    mechanism = OAuthBearerMechanism(RefusedError, clock=lambda: NOW)
    assert mechanism.step(initial_response(token)) == (b"", True)
    assert mechanism.user == "alice"
    with pytest.raises(RefusedError, match="after completion"):
        mechanism.step(initial_response(token))
    same = OAuthBearerMechanism(RefusedError, clock=lambda: NOW)
    same.step(initial_response(token, authzid="alice"))
    assert same.user == "alice"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"\xff", "UTF-8"),
        (b"n,,auth=Bearer x\x01\x01", "malformed OAUTHBEARER client message"),
        (b"y,,\x01auth=Bearer x\x01\x01", "GS2 header"),
        (b"n,,\x01auth=Bearer x\x01", "malformed OAUTHBEARER client message"),
        (b"n,,\x01auth=Bearer x\x01auth=Bearer y\x01\x01", "key/value"),
        (b"n,,\x01host=h\x01\x01", "no bearer token"),
        (b"n,,\x01auth=Basic abc\x01\x01", "no bearer token"),
    ],
)
def test_mechanism_refuses_malformed_messages(message: bytes, reason: str) -> None:
    with pytest.raises(RefusedError, match=reason):
        OAuthBearerMechanism(RefusedError, clock=lambda: NOW).step(message)


def test_mechanism_refuses_an_authzid_other_than_the_subject() -> None:
    token = _jwt({"alg": "none"}, GOOD)
    with pytest.raises(RefusedError, match="authorization id"):
        OAuthBearerMechanism(RefusedError, clock=lambda: NOW).step(initial_response(token, "bob"))


def test_initial_response_is_rfc_7628() -> None:
    assert initial_response("t.k.") == b"n,,\x01auth=Bearer t.k.\x01\x01"
    with_extensions = initial_response("t.k.", "", (("logicalCluster", "lkc-1"), ("x", "y z")))
    assert with_extensions == b"n,,\x01auth=Bearer t.k.\x01logicalCluster=lkc-1\x01x=y z\x01\x01"
    token = _jwt({"alg": "none"}, GOOD)
    mechanism = OAuthBearerMechanism(RefusedError, clock=lambda: NOW)
    mechanism.step(initial_response(token, "", (("logicalCluster", "lkc-1"),)))
    assert mechanism.extensions == {"logicalCluster": "lkc-1"}


@pytest.mark.parametrize(
    ("argument", "reason"),
    [('extension_auth="x"', "not 'auth'"), ('extension_a="\x00"', "printable ASCII")],
)
def test_bad_sasl_extensions(argument: str, reason: str) -> None:
    jaas = (
        f"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required {argument};"
    )
    with pytest.raises(ConfigError, match=reason):
        SecurityConfig.from_options(
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.provider": "tests.support.oauth:alice_token",
                "sasl.jaas.config": jaas,
            }
        )
    assert challenge_status(b'{"status":"invalid_token"}') == "status invalid_token"
    assert challenge_status(b"junk") == "an unreadable error challenge"


def test_token_freshness_and_caching() -> None:
    assert not OAuthToken("t", None, NOW).fresh(NOW)
    token = OAuthToken("t", NOW + 100, NOW)
    assert token.fresh(NOW + 60) and not token.fresh(NOW + 80)  # 30 s margin (max 20 %, 30 s)
    assert "'t'" not in repr(token) and "value" not in repr(token)
    config = OAuthConfig(provider="tests.support.oauth:alice_token")
    first = current_token(config)
    assert current_token(config) is first  # cached until near expiry
    ms = current_token(OAuthConfig(provider="tests.support.oauth:alice_token_ms"))
    assert ms.expires_at is not None and abs(ms.expires_at - ms.issued_at - 300) < 5
    bare = OAuthConfig(provider="tests.support.oauth:alice_token_only")
    assert current_token(bare) is not current_token(bare)  # no expiry: asked every time
    token_value, expiry, principal, extensions = librdkafka_oauth_cb(bare)("")
    assert extensions == {}
    assert principal == "alice" and expiry > time.time() and token_value.count(".") == 2


def test_security_config_parses_client_credentials_and_hides_the_secret() -> None:
    sec = SecurityConfig.from_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "oauthbearer",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
            "sasl.jaas.config": JAAS,
        }
    )
    assert sec.oauth == OAuthConfig(
        token_endpoint_url="https://idp.example/token",
        client_id="cid",
        client_secret=SECRET,
        scope="a b",
    )
    assert SECRET not in repr(sec) and SECRET not in str(sec)


def test_kafka_options_translate_for_both_clients_without_showing_secrets() -> None:
    raw = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.jaas.config": JAAS,
    }
    assert check_security(raw) == {}
    assert client_options(raw, producer_options=frozenset(), ignored=frozenset()) == raw
    params = librdkafka_params(raw, rejected={}, handled=frozenset())
    assert SECRET not in repr(redact(params))
    conf = librdkafka_client_config(params)
    assert set(conf) == {"security.protocol", "sasl.mechanism", "oauth_cb"}
    plain = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    assert librdkafka_client_config(plain) == plain


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"sasl.jaas.config": JAAS}, "'kafka.sasl.mechanism'='OAUTHBEARER'"),
        ({"sasl.mechanism": "OAUTHBEARER"}, "'kafka.sasl.oauthbearer.token.provider'"),
        (
            {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url": "http://x"},
            "'kafka.sasl.oauthbearer.token.endpoint.url' needs clientId",
        ),
    ],
)
def test_kafka_option_errors_name_the_options(raw: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as info:
        check_security(raw)
    assert SECRET not in str(info.value)


def test_provider_import_errors() -> None:
    with pytest.raises(ConfigError, match="cannot be imported"):
        current_token(OAuthConfig(provider="tests.support.oauth:no_such_function"))
