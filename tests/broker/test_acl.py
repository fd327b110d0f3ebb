"""The authorizer's decisions, as Kafka 4.1's ``StandardAuthorizer`` takes them.

DENY wins, implied operations for ALLOW only, literal / wildcard / prefixed patterns, the
no-ACL default, authorizeByResourceType, filters, and the RFC 2253 principal of a client
certificate.
"""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_kafka_txn.embedded.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    InvalidAclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from pyspark_kafka_txn.embedded.security import certificate_principal

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"
T, G, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
Op, P = Operation, PatternType


def acl(
    rtype: ResourceType,
    name: str,
    op: Operation,
    *,
    principal: str = ALICE,
    pattern: PatternType = P.LITERAL,
    permission: Permission = Permission.ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        resource_type=rtype,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission=permission,
    )


def authorizer(*acls: AclBinding, **kwargs: object) -> Authorizer:
    auth = Authorizer(("User:admin",), **kwargs)
    for a in acls:
        auth.add(a)
    return auth


def test_allow_implies_describe_but_deny_does_not() -> None:
    auth = authorizer(acl(T, "t", Op.WRITE), acl(G, "g", Op.ALTER_CONFIGS))
    assert auth.authorize(ALICE, HOST, Op.WRITE, T, "t")
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE, T, "t")
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "t")
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, G, "g")
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE, G, "g")  # ALTER_CONFIGS is not ALTER
    denied = authorizer(acl(T, "t", Op.ALL), acl(T, "t", Op.READ, permission=Permission.DENY))
    assert not denied.authorize(ALICE, HOST, Op.READ, T, "t")
    assert denied.authorize(ALICE, HOST, Op.DESCRIBE, T, "t")  # DENY READ is not DENY DESCRIBE
    # WRITE does not imply TWO_PHASE_COMMIT.
    assert not authorizer(acl(TX, "x", Op.WRITE)).authorize(
        ALICE, HOST, Op.TWO_PHASE_COMMIT, TX, "x"
    )


def test_deny_wins_across_literal_prefixed_and_wildcard() -> None:
    auth = authorizer(
        acl(T, "orders-", Op.READ, pattern=P.PREFIXED),
        acl(T, "*", Op.ALL, principal="User:*", permission=Permission.DENY, host="10.9.9.9"),
        acl(T, "orders-secret", Op.READ, permission=Permission.DENY),
    )
    assert auth.authorize(ALICE, HOST, Op.READ, T, "orders-1")
    assert not auth.authorize(ALICE, "10.9.9.9", Op.READ, T, "orders-1")  # host-scoped DENY
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "orders-secret")
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "order")  # the prefix is longer
    assert not auth.authorize(BOB, HOST, Op.READ, T, "orders-1")
    assert auth.authorize("User:admin", "10.9.9.9", Op.ALTER, T, "orders-secret")  # super user


def test_literal_names_and_prefixes_match_exactly() -> None:
    auth = authorizer(acl(T, "a", Op.READ), acl(T, "*", Op.WRITE, pattern=P.PREFIXED))
    assert auth.authorize(ALICE, HOST, Op.READ, T, "a")
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "ab")  # a literal is not a prefix
    assert not auth.authorize(ALICE, HOST, Op.WRITE, T, "x")  # PREFIXED "*" is no wildcard
    assert auth.authorize(ALICE, HOST, Op.WRITE, T, "*x")


def test_no_acl_default_is_resource_wide() -> None:
    """allow.everyone.if.no.acl.found applies only where no ACL of anyone is bound."""
    auth = authorizer(acl(T, "bound", Op.READ, principal=BOB), allow_everyone_if_no_acl_found=True)
    assert auth.authorize(ALICE, HOST, Op.WRITE, T, "free")
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "bound")
    assert not authorizer().authorize(ALICE, HOST, Op.READ, T, "free")  # off by default


def test_authorize_any_follows_kip_679() -> None:
    def any_write(*acls: AclBinding) -> bool:
        return authorizer(*acls).authorize_any(ALICE, HOST, Op.WRITE, T)

    assert not any_write()
    assert any_write(acl(T, "t", Op.WRITE))
    assert any_write(acl(T, "t", Op.ALL))
    assert not any_write(acl(T, "t", Op.READ))  # no implication here
    assert not any_write(acl(T, "t", Op.WRITE), acl(T, "t", Op.WRITE, permission=Permission.DENY))
    assert not any_write(
        acl(T, "ab", Op.WRITE),
        acl(T, "a", Op.WRITE, pattern=P.PREFIXED, permission=Permission.DENY),
    )
    # A literal DENY does not cancel a prefixed ALLOW.
    assert any_write(
        acl(T, "p-", Op.WRITE, pattern=P.PREFIXED),
        acl(T, "p-", Op.WRITE, permission=Permission.DENY),
    )
    assert not any_write(acl(T, "*", Op.WRITE), acl(T, "*", Op.WRITE, permission=Permission.DENY))
    # Kafka's first probe of the made-up name "hardcode": a prefix of it allows.
    assert any_write(acl(T, "h", Op.WRITE, pattern=P.PREFIXED))


def test_filters_select_as_kafka_does() -> None:
    lit = acl(T, "orders", Op.READ)
    wild = acl(T, "*", Op.READ)
    pre = acl(T, "ord", Op.WRITE, pattern=P.PREFIXED)
    other = acl(G, "orders", Op.READ, principal=BOB)
    auth = authorizer(lit, wild, pre, other)

    def find(rtype: ResourceType, name: str | None, pattern: PatternType, **kw: object) -> set[Any]:
        return set(
            auth.describe(
                AclFilter(
                    resource_type=rtype,
                    resource_name=name,
                    pattern_type=pattern,
                    principal=kw.get("principal"),
                    host=None,
                    operation=kw.get("op", Op.ANY),
                    permission=Permission.ANY,
                )
            )
        )

    assert find(ResourceType.ANY, "orders", P.ANY) == {lit, other}
    assert find(T, "orders", P.MATCH) == {lit, wild, pre}
    assert find(T, "orders", P.LITERAL) == {lit}
    assert find(T, None, P.PREFIXED) == {pre}
    assert find(ResourceType.ANY, None, P.ANY, principal=BOB) == {other}
    assert find(T, None, P.ANY, op=Op.READ) == {lit, wild}
    assert auth.delete(
        AclFilter(
            resource_type=T,
            resource_name=None,
            pattern_type=P.ANY,
            principal=None,
            host=None,
            operation=Op.ANY,
            permission=Permission.ANY,
        )
    ) == [lit, wild, pre]
    assert len(auth) == 1


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (acl(ResourceType.CLUSTER, "c", Op.ALTER), "kafka-cluster"),
        (acl(T, "", Op.READ), "empty resource name"),
        (acl(T, "t", Op.READ, principal="alice"), "Could not parse principal"),
        (acl(T, "t", Op.READ, pattern=P.MATCH), "patternType"),
        (acl(T, "t", Op.ANY), "operation"),
    ],
)
def test_invalid_acls_are_refused_with_the_reason(binding: AclBinding, reason: str) -> None:
    with pytest.raises(InvalidAclError, match=reason):
        Authorizer().add(binding)


def test_acls_round_trip_through_json() -> None:
    auth = authorizer(acl(TX, "app-", Op.WRITE, pattern=P.PREFIXED), acl(T, "t", Op.READ))
    again = Authorizer()
    again.load(auth.to_json())
    assert again.to_json() == auth.to_json()
    assert again.authorize(ALICE, HOST, Op.DESCRIBE, TX, "app-7")


def test_certificate_principal_is_the_rfc2253_subject() -> None:
    peercert = {
        "subject": (
            (("countryName", "DE"),),
            (("organizationName", "Acme, Inc."),),
            (("organizationalUnitName", "eng"), ("commonName", "x+y")),
            (("commonName", " writer"),),
        )
    }
    assert (
        certificate_principal(peercert) == "User:CN=\\ writer,OU=eng+CN=x\\+y,O=Acme\\, Inc.,C=DE"
    )
    assert certificate_principal(None) is None
    assert certificate_principal({}) is None
