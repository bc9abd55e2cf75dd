"""The authorization decision (Kafka's StandardAuthorizer rules) against a brute-force
model, and the rules of CreateAcls/DescribeAcls/DeleteAcls validation and filters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    AclIndex,
    InvalidAcl,
    Policy,
    all_operations,
    authorize,
    authorized_operations,
    check_binding,
    check_filter,
    filter_matches,
    parse_super_users,
)
from lakelog.security.acl import (
    Operation as Op,
)
from lakelog.security.acl import (
    PatternType as Pt,
)
from lakelog.security.acl import (
    Permission as Pm,
)
from lakelog.security.acl import (
    ResourceType as Rt,
)

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(
    name: str,
    op: Op = Op.READ,
    principal: str = ALICE,
    pattern: Pt = Pt.LITERAL,
    permission: Pm = Pm.ALLOW,
    host: str = "*",
    kind: Rt = Rt.TOPIC,
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, op, permission)


def decide(
    bindings: list[AclBinding],
    op: Op,
    name: str = "orders",
    principal: str = ALICE,
    host: str = HOST,
    kind: Rt = Rt.TOPIC,
    policy: Policy = Policy(),
) -> bool:
    return authorize(AclIndex(bindings), policy, principal, host, kind, name, op)


def model(
    bindings: list[AclBinding],
    policy: Policy,
    principal: str,
    host: str,
    kind: Rt,
    name: str,
    op: Op,
) -> bool:
    """The rules as the Kafka documentation states them, one ACL at a time."""
    if principal in policy.super_users:
        return True
    applying = [
        b
        for b in bindings
        if b.resource_type == kind
        and (
            (b.pattern_type == Pt.LITERAL and b.resource_name in ("*", name))
            or (b.pattern_type == Pt.PREFIXED and name.startswith(b.resource_name))
        )
    ]
    if not applying:
        return policy.allow_if_no_acl
    mine = [b for b in applying if b.principal in (principal, "User:*") and b.host in ("*", host)]
    if any(b.permission == Pm.DENY and b.operation in (op, Op.ALL) for b in mine):
        return False
    granting = {op, Op.ALL}
    if op == Op.DESCRIBE:
        granting |= {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}
    if op == Op.DESCRIBE_CONFIGS:
        granting |= {Op.ALTER_CONFIGS}
    return any(b.permission == Pm.ALLOW and b.operation in granting for b in mine)


def test_no_acl_denies_by_default_and_allows_when_configured() -> None:
    assert not decide([], Op.READ)
    assert decide([], Op.READ, policy=Policy(allow_if_no_acl=True))
    # An ACL on the resource for someone else: no longer "no ACL found".
    assert not decide([acl("orders", principal=BOB)], Op.READ, policy=Policy(allow_if_no_acl=True))


def test_deny_beats_allow() -> None:
    bindings = [acl("orders", Op.ALL), acl("ord", Op.READ, pattern=Pt.PREFIXED, permission=Pm.DENY)]
    assert not decide(bindings, Op.READ)
    assert decide(bindings, Op.WRITE)


def test_implied_operations() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert decide([acl("orders", op)], Op.DESCRIBE)
    assert decide([acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not decide([acl("orders", Op.DESCRIBE)], Op.READ)
    assert not decide([acl("orders", Op.CREATE)], Op.DESCRIBE)
    # A DENY of READ does not deny DESCRIBE (Kafka implies only for ALLOW).
    assert decide(
        [acl("orders", Op.DESCRIBE), acl("orders", Op.READ, permission=Pm.DENY)], Op.DESCRIBE
    )


def test_patterns_principals_and_hosts() -> None:
    assert decide([acl("ord", pattern=Pt.PREFIXED)], Op.READ, "orders")
    assert not decide([acl("ord", pattern=Pt.PREFIXED)], Op.READ, "payments")
    assert decide([acl("*")], Op.READ, "anything")
    assert decide([acl("orders", principal="User:*")], Op.READ)
    assert decide([acl("orders", host=HOST)], Op.READ)
    assert not decide([acl("orders", host="10.9.9.9")], Op.READ)
    assert not decide([acl("orders", kind=Rt.GROUP)], Op.READ)


def test_hosts_match_however_the_address_is_written() -> None:
    """Kafka's tools print IPv6 hosts the Java way; a dual-stack listener sees IPv4 clients
    as IPv4-mapped addresses. The ACL matches either way; other addresses do not."""
    java_loopback = acl("orders", host="0:0:0:0:0:0:0:1")
    assert decide([java_loopback], Op.READ, host="::1")
    assert decide([acl("orders", host="::1")], Op.READ, host="0:0:0:0:0:0:0:1")
    assert decide([acl("orders", host=HOST)], Op.READ, host=f"::ffff:{HOST}")
    assert decide([acl("orders", host="2001:DB8::1")], Op.READ, host="2001:db8:0:0:0:0:0:1")
    assert not decide([java_loopback], Op.READ, host="::2")
    assert not decide([acl("orders", host="::ffff:10.0.0.2")], Op.READ, host=HOST)
    assert decide([acl("orders", host="broker-host")], Op.READ, host="broker-host")
    deny = acl("orders", host="0:0:0:0:0:0:0:1", permission=Pm.DENY)
    assert not decide([acl("orders"), deny], Op.READ, host="::1")  # a DENY matches too
    assert filter_matches(AclFilter(host="::1"), java_loopback)
    assert not filter_matches(AclFilter(host="::2"), java_loopback)


def test_super_users() -> None:
    policy = Policy(parse_super_users("User:admin; User:ops ;"))
    assert policy.super_users == {"User:admin", "User:ops"}
    denied = [acl("orders", Op.ALL, principal="User:*", permission=Pm.DENY)]
    assert decide(denied, Op.READ, principal="User:ops", policy=policy)
    assert not decide(denied, Op.READ, principal=ALICE, policy=policy)


def test_authorized_operations_bits() -> None:
    index = AclIndex([acl("orders", Op.READ)])
    bits = authorized_operations(index, Policy(), ALICE, HOST, Rt.TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert all_operations(Rt.GROUP) == (1 << 3) | (1 << 6) | (1 << 8)


NAMES = st.sampled_from(["", "o", "or", "orders", "orders-eu", "pay", "*"])
BINDINGS = st.builds(
    AclBinding,
    st.sampled_from([Rt.TOPIC, Rt.GROUP]),
    NAMES,
    st.sampled_from([Pt.LITERAL, Pt.PREFIXED]),
    st.sampled_from([ALICE, BOB, "User:*"]),
    st.sampled_from(["*", HOST, "10.0.0.2"]),
    st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]),
    st.sampled_from([Pm.ALLOW, Pm.DENY]),
)


@settings(max_examples=400, deadline=None)
@given(
    bindings=st.lists(BINDINGS, max_size=8),
    principal=st.sampled_from([ALICE, BOB, "User:carol"]),
    host=st.sampled_from([HOST, "10.0.0.2"]),
    kind=st.sampled_from([Rt.TOPIC, Rt.GROUP]),
    name=NAMES.filter(lambda n: n not in ("", "*")),
    op=st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY, Op.ALL)]),
    allow_if_no_acl=st.booleans(),
    super_user=st.booleans(),
)
def test_decision_matches_the_model(
    bindings: list[AclBinding],
    principal: str,
    host: str,
    kind: Rt,
    name: str,
    op: Op,
    allow_if_no_acl: bool,
    super_user: bool,
) -> None:
    policy = Policy(frozenset({BOB}) if super_user else frozenset(), allow_if_no_acl)
    expected = model(bindings, policy, principal, host, kind, name, op)
    assert authorize(AclIndex(bindings), policy, principal, host, kind, name, op) == expected


@pytest.mark.parametrize(
    ("binding", "why"),
    [
        (acl("t", kind=Rt.UNKNOWN), "resource type"),
        (acl("t", kind=Rt.ANY), "resource type"),
        (acl("t", pattern=Pt.MATCH), "patternType"),
        (acl("t", pattern=Pt.ANY), "patternType"),
        (acl("t", op=Op.ANY), "operation"),
        (acl("t", permission=Pm.ANY), "permissionType"),
        (acl(""), "empty"),
        (acl("other", kind=Rt.CLUSTER, op=Op.ALTER), "kafka-cluster"),
        (acl("t", principal="alice"), "principal"),
        (acl("t", op=Op.IDEMPOTENT_WRITE), "not valid"),
        (acl("g", kind=Rt.GROUP, op=Op.WRITE), "not valid"),
    ],
)
def test_invalid_bindings(binding: AclBinding, why: str) -> None:
    with pytest.raises(InvalidAcl, match=why):
        check_binding(binding)


def test_valid_bindings() -> None:
    check_binding(acl("kafka-cluster", Op.IDEMPOTENT_WRITE, kind=Rt.CLUSTER))
    check_binding(acl("tx", Op.WRITE, kind=Rt.TRANSACTIONAL_ID, pattern=Pt.PREFIXED))
    check_binding(acl("t", Op.ALL, principal="User:*", permission=Pm.DENY))


def test_filters() -> None:
    literal, prefixed = acl("orders"), acl("ord", Op.WRITE, pattern=Pt.PREFIXED)
    wildcard, group = acl("*"), acl("g", kind=Rt.GROUP, permission=Pm.DENY)
    every = [literal, prefixed, wildcard, group]

    def select(f: AclFilter) -> list[AclBinding]:
        return [b for b in every if filter_matches(f, b)]

    assert select(AclFilter()) == every
    assert select(AclFilter(Rt.TOPIC, "orders", Pt.MATCH)) == [literal, prefixed, wildcard]
    assert select(AclFilter(Rt.TOPIC, "orders", Pt.LITERAL)) == [literal]
    assert select(AclFilter(Rt.TOPIC, "ord", Pt.ANY)) == [prefixed]
    assert select(AclFilter(operation=Op.WRITE)) == [prefixed]
    assert select(AclFilter(permission=Pm.DENY)) == [group]
    assert select(AclFilter(principal=BOB)) == []
    with pytest.raises(InvalidAcl):
        check_filter(AclFilter(pattern_type=Pt.UNKNOWN))


def test_filter_principals_compare_as_written() -> None:
    """Kafka checks no filter principal (DescribeAcls and DeleteAcls compare it as a string):
    `*` and `nobody` are accepted and select nothing; `User:*` selects only the ACLs for
    everyone, not every ACL."""
    alice, everyone = acl("orders"), acl("orders", principal="User:*")
    for principal in ("*", "nobody", "User:*", "User:alice"):
        check_filter(AclFilter(principal=principal))
    assert not filter_matches(AclFilter(principal="*"), everyone)
    assert not filter_matches(AclFilter(principal="nobody"), alice)
    assert filter_matches(AclFilter(principal="User:*"), everyone)
    assert not filter_matches(AclFilter(principal="User:*"), alice)
