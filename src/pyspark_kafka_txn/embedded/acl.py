"""Access control lists of the embedded cluster, modelled on Kafka's StandardAuthorizer.

An ACL binds a resource pattern (resource type, name, LITERAL or PREFIXED) to an entry
(principal, host, operation, ALLOW or DENY). A request is allowed when its principal is
a super user, or when some ALLOW entry matches and no DENY entry does (DENY wins). An
entry matches a resource when its pattern is the exact name, the wildcard ``*`` or a
prefix of the name; its principal is the request's or ``User:*``; its host is the
client's address or ``*``; its operation is the one asked, ``ALL``, or (for ALLOW only)
one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS. When no ACL at all is bound to a matching pattern of the resource,
``allow_everyone_if_no_acl_found`` decides (off by default, as in Kafka).

:meth:`Authorizer.authorize_any` is Kafka's ``authorizeByResourceType`` (KIP-679): may
the principal perform the operation on *some* resource of a type (used by InitProducerId
for idempotent producers).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` codes (ANY and MATCH only in filters)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    """Kafka's ``AclPermissionType`` codes (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# ALLOW of the key operation also allows the operations of its value.
_IMPLIED: Mapping[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER)
    ),
    Operation.DESCRIBE_CONFIGS: frozenset((Operation.ALTER_CONFIGS,)),
}


class InvalidAclError(ValueError):
    """An ACL (or filter) that Kafka would refuse with INVALID_REQUEST."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def check(self) -> None:
        """Raise :class:`InvalidAclError` if Kafka would not store this ACL."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAclError(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAclError(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidAclError(f"Invalid operation {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAclError(f"Invalid permissionType {self.permission.name}")
        if not self.resource_name:
            raise InvalidAclError("Invalid empty resource name")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        check_principal(self.principal)
        if not self.host:
            raise InvalidAclError("Invalid empty host")

    def to_json(self) -> list[Any]:
        return [
            int(self.resource_type),
            self.resource_name,
            int(self.pattern_type),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission),
        ]

    @classmethod
    def from_json(cls, row: list[Any]) -> AclBinding:
        rtype, name, pattern, principal, host, op, permission = row
        return cls(
            resource_type=ResourceType(rtype),
            resource_name=name,
            pattern_type=PatternType(pattern),
            principal=principal,
            host=host,
            operation=Operation(op),
            permission=Permission(permission),
        )


def check_principal(principal: str) -> None:
    """A principal is ``Type:name`` with a non-empty type (Kafka's parseKafkaPrincipal)."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAclError(f"Could not parse principal from `{principal}` (no colon is found)")


@dataclass(frozen=True, slots=True, kw_only=True)
class AclFilter:
    """A DescribeAcls/DeleteAcls filter; ``None`` strings and ANY codes match anything.

    ``pattern_type`` MATCH selects the ACLs that would apply to a resource named
    ``resource_name``: that literal name, the wildcard, and every prefix of it.
    """

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def check(self) -> None:
        """Raise :class:`InvalidAclError` for a filter that can match nothing valid."""
        for name, value in (
            ("resourceType", self.resource_type),
            ("patternType", self.pattern_type),
            ("operation", self.operation),
            ("permissionType", self.permission),
        ):
            if value == 0:
                raise InvalidAclError(f"Invalid {name} UNKNOWN in the filter")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission is Permission.ANY or acl.permission == self.permission

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type is PatternType.ANY:
            return self.resource_name is None or acl.resource_name == self.resource_name
        if self.pattern_type is PatternType.MATCH:
            if self.resource_name is None:
                return True
            if acl.pattern_type is PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD)
            return self.resource_name.startswith(acl.resource_name)
        if acl.pattern_type != self.pattern_type:
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


def _covers(acl: AclBinding, resource_type: ResourceType, name: str) -> bool:
    """Whether the ACL's resource pattern applies to the named resource."""
    if acl.resource_type != resource_type:
        return False
    if acl.pattern_type is PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD)
    return name.startswith(acl.resource_name)


def _entry_applies(acl: AclBinding, principal: str, host: str) -> bool:
    return acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)


class Authorizer:
    """The ACLs of a cluster and the decisions taken from them.

    Parameters
    ----------
    super_users
        Principals (``User:name``) allowed everything, whatever the ACLs say
        (``super.users``).
    allow_everyone_if_no_acl_found
        ``allow.everyone.if.no.acl.found``: allow a request on a resource no ACL is
        bound to (off, as in Kafka).
    """

    def __init__(
        self, super_users: Iterable[str] = (), *, allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        for principal in self.super_users:
            check_principal(principal)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[AclBinding, None] = {}  # insertion-ordered set

    # --- decisions ----------------------------------------------------------------

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """May ``principal`` connecting from ``host`` perform ``operation`` on the resource?"""
        if principal in self.super_users:
            return True
        bound = allowed = False
        for acl in self._acls:
            if not _covers(acl, resource_type, name):
                continue
            bound = True
            if not _entry_applies(acl, principal, host):
                continue
            if acl.permission is Permission.DENY:
                if acl.operation in (operation, Operation.ALL):
                    return False
            elif acl.operation in (operation, Operation.ALL) or acl.operation in _IMPLIED.get(
                operation, ()
            ):
                allowed = True
        if not bound:
            return self.allow_everyone_if_no_acl_found
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """May the principal perform ``operation`` on at least one resource of the type?

        Kafka's ``authorizeByResourceType``: a super user may; a wildcard DENY forbids;
        otherwise some ALLOW pattern (of exactly this operation or ALL) must name a
        resource that no DENY literal of the same name nor DENY prefix of it covers.
        """
        # A made-up name, as Kafka's default does, lets super users (and the
        # no-ACL rule) through before any DENY is considered.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[AclBinding] = []
        for acl in self._acls:
            if acl.resource_type != resource_type or not _entry_applies(acl, principal, host):
                continue
            if acl.operation not in (operation, Operation.ALL):
                continue
            if acl.permission is Permission.DENY:
                if acl.pattern_type is PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixed.add(acl.resource_name)
            else:
                allow.append(acl)
        for acl in allow:
            name = acl.resource_name
            if acl.pattern_type is PatternType.LITERAL:
                if name == WILDCARD:
                    return True
                if name in deny_literal:
                    continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False

    # --- CreateAcls / DescribeAcls / DeleteAcls -------------------------------------

    def add(self, acl: AclBinding) -> None:
        """Store a (checked) ACL; adding one that exists changes nothing."""
        acl.check()
        self._acls[acl] = None

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self._acls if acl_filter.matches(acl)]

    def delete(self, acl_filter: AclFilter) -> list[AclBinding]:
        matched = self.describe(acl_filter)
        for acl in matched:
            del self._acls[acl]
        return matched

    def __len__(self) -> int:
        return len(self._acls)

    # --- persistence ----------------------------------------------------------------

    def to_json(self) -> list[list[Any]]:
        return [acl.to_json() for acl in self._acls]

    def load(self, rows: Iterable[list[Any]]) -> None:
        for row in rows:
            self._acls[AclBinding.from_json(row)] = None
