"""ACLs as Kafka operators run them, against real clients on a SASL_SSL listener with
the authorizer on and `User:admin` a super user: a principal without ACLs can do nothing;
a PREFIXED READ grant lets it consume exactly those topics; a DENY beats an ALLOW; ACLs
made on one broker hold on another within a second; the ACL admin APIs through
confluent-kafka's and kafka-python's admin clients (a filter principal compared as written,
`*` accepted, as Kafka does); bad CreateAcls entries get
INVALID_REQUEST and the broker carries on."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kafka
import kafka.admin as kadmin
import kafka.errors
import pytest
from cluster_support import CLUSTER_ENV
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (
    AclBinding as CkAclBinding,
)
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from e2e_fixtures import FAST_COMMITS, close_all
from e2e_harness import BrokerProcess, wait_until
from security_support import (
    Pki,
    SecureBrokerProcess,
    client_tls,
    every_acl,
    listener_env,
    make_pki,
    write_users,
)

from lakelog.admin.client import AdminClient as LakelogAdmin
from lakelog.admin.wire import KafkaError as LakelogError
from lakelog.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission
from lakelog.security.acl import ResourceType as Rt
from lakelog.security.client_config import ClientSecurity
from lakelog.util.errors import ErrorCode

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TIMEOUT = 30


_PKI: list[Pki] = []
"""The module's CA and server certificate (see `pki`): every client here trusts it."""


@pytest.fixture(scope="module", autouse=True)
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pki]:
    made = make_pki(tmp_path_factory.mktemp("acl-pki"))
    _PKI.append(made)
    yield made
    _PKI.remove(made)


def _ca() -> str:
    return str(_PKI[-1].ca)


def _env(tmp_path: Path) -> dict[str, object]:
    users = write_users(tmp_path / "acl-users.txt", USERS)
    return {
        **listener_env("SASL_SSL", _PKI[-1], users),
        "AUTHORIZER_ENABLED": "true",
        "SUPER_USERS": "User:admin",
    }


TlsFactory = Callable[..., BrokerProcess]


@pytest.fixture
def acl_factory(tmp_path: Path) -> Iterator[TlsFactory]:
    """Brokers on a SASL_SSL listener (readiness probed over TLS), closed afterwards."""
    started: list[SecureBrokerProcess] = []

    def make(env: dict[str, object], data_dir: Path | None = None) -> BrokerProcess:
        proc = SecureBrokerProcess(
            data_dir or tmp_path / f"data{len(started)}",
            env={**FAST_COMMITS, **env},
            name=f"acl{len(started)}",
            tls=client_tls(_PKI[-1]),
        )
        started.append(proc)
        proc.start()
        return proc

    yield make
    close_all(started)


@pytest.fixture
def acl_broker(acl_factory: TlsFactory, tmp_path: Path) -> BrokerProcess:
    return acl_factory(_env(tmp_path))


def conf(broker: BrokerProcess, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": _ca(),
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def kafka_python_conf(broker: BrokerProcess, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.bootstrap,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": _ca(),
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def security(user: str) -> ClientSecurity:
    return ClientSecurity.from_configs(
        {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": _ca(),
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
        }
    )


def create_topics(broker: BrokerProcess, *names: str) -> None:
    admin = AdminClient(conf(broker, "admin"))
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=TIMEOUT)
    for future in futures.values():
        future.result(TIMEOUT)


def grant(broker: BrokerProcess, *bindings: CkAclBinding) -> None:
    admin = AdminClient(conf(broker, "admin"))
    for future in admin.create_acls(list(bindings), request_timeout=TIMEOUT).values():
        assert future.result(TIMEOUT) is None


def acl(
    kind: ResourceType,
    name: str,
    operation: AclOperation,
    principal: str = "User:alice",
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> CkAclBinding:
    return CkAclBinding(kind, name, pattern, principal, "*", operation, permission)


def produce(broker: BrokerProcess, user: str, topic: str, value: bytes) -> KafkaError | None:
    """Produce one record; the delivery error (None: delivered)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**conf(broker, user), "message.timeout.ms": 15_000})
    producer.produce(topic, value=value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(TIMEOUT)
    assert len(outcome) == 1
    return outcome[0]


def consume(
    broker: BrokerProcess, user: str, group: str, topics: list[str], count: int
) -> tuple[list[bytes], list[KafkaError]]:
    """Up to `count` records (or the first authorization errors) of a group consumer."""
    consumer = Consumer({**conf(broker, user), "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe(topics)
    got: list[bytes] = []
    errors: list[KafkaError] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < count and not errors and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() in AUTH_ERRORS:
                errors.append(message.error())
            continue
        got.append(message.value())
    consumer.close()
    return got, errors


AUTH_ERRORS = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
}


def test_principal_without_acls_can_do_nothing(acl_broker: BrokerProcess, topic_name: str) -> None:
    create_topics(acl_broker, topic_name)
    assert produce(acl_broker, "admin", topic_name, b"by the super user") is None

    err = produce(acl_broker, "alice", topic_name, b"refused")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    alice = AdminClient(conf(acl_broker, "alice"))
    assert topic_name not in alice.list_topics(timeout=TIMEOUT).topics  # left out
    named = alice.list_topics(topic=topic_name, timeout=TIMEOUT).topics[topic_name]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    [future] = alice.create_topics([NewTopic(topic_name + "-new", 1, 1)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    got, errors = consume(acl_broker, "alice", "alice-readers", [topic_name], 1)
    assert got == [] and errors

    # kafka-python: the producer learns the topic is off limits from Metadata.
    producer = kafka.KafkaProducer(**kafka_python_conf(acl_broker, "alice"), max_block_ms=10_000)
    with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
        producer.send(topic_name, b"refused").get(TIMEOUT)
    producer.close(0)
    assert "Traceback" not in acl_broker.log_text()


def test_prefixed_read_grant_consumes_only_those_topics(acl_broker: BrokerProcess) -> None:
    create_topics(acl_broker, "pay-a", "pay-b", "other")
    for name in ("pay-a", "pay-b", "other"):
        assert produce(acl_broker, "admin", name, name.encode()) is None
    grant(
        acl_broker,
        acl(ResourceType.TOPIC, "pay-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.GROUP, "readers", AclOperation.READ),
    )
    got, errors = consume(acl_broker, "alice", "readers", ["pay-a", "pay-b"], 2)
    assert sorted(got) == [b"pay-a", b"pay-b"] and not errors

    listed = AdminClient(conf(acl_broker, "alice")).list_topics(timeout=TIMEOUT).topics
    assert {"pay-a", "pay-b"} <= set(listed) and "other" not in listed  # READ implies DESCRIBE

    got, errors = consume(acl_broker, "alice", "readers", ["other"], 1)
    assert got == []
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # Another group is not granted.
    got, errors = consume(acl_broker, "alice", "not-granted", ["pay-a"], 1)
    assert got == [] and [e.code() for e in errors] == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    # READ is not WRITE.
    err = produce(acl_broker, "alice", "pay-a", b"no")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_deny_overrides_allow(acl_broker: BrokerProcess) -> None:
    create_topics(acl_broker, "open", "secret")
    grant(
        acl_broker,
        acl(ResourceType.TOPIC, "*", AclOperation.WRITE),
        acl(ResourceType.TOPIC, "secret", AclOperation.ALL, permission=AclPermissionType.DENY),
    )
    assert produce(acl_broker, "alice", "open", b"fine") is None
    err = produce(acl_broker, "alice", "secret", b"denied")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The DENY names alice only: bob has no ALLOW at all.
    err = produce(acl_broker, "bob", "open", b"no acl")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_made_on_one_broker_hold_on_another(
    acl_factory: TlsFactory, tmp_path: Path, topic_name: str
) -> None:
    data_dir = tmp_path / "cluster"
    env = {**_env(tmp_path), **CLUSTER_ENV}
    first = acl_factory({**env, "BROKER_ID": 1}, data_dir=data_dir)
    second = acl_factory({**env, "BROKER_ID": 2}, data_dir=data_dir)
    create_topics(first, topic_name)

    async def run() -> float:
        admin = await LakelogAdmin.connect(first.bootstrap, security=security("admin"))
        alice = await LakelogAdmin.connect(second.bootstrap, security=security("alice"))
        try:
            with pytest.raises(LakelogError) as refused:
                await alice.describe_topics([topic_name])
            assert refused.value.error == ErrorCode.topic_authorization_failed
            binding = AclBinding(
                Rt.TOPIC, topic_name, PatternType.LITERAL, "User:alice", "*",
                Operation.DESCRIBE, Permission.ALLOW,
            )  # fmt: skip
            assert await admin.create_acls([binding]) == [None]
            made = time.monotonic()
            while True:
                try:
                    [described] = await alice.describe_topics([topic_name])
                    break
                except LakelogError as exc:
                    assert exc.error == ErrorCode.topic_authorization_failed
                    assert time.monotonic() - made < 10, "not enforced on the other broker"
                    await asyncio.sleep(0.02)
            assert described.name == topic_name
            elapsed = time.monotonic() - made
            # Deleted on the second broker: the first refuses again.
            [deleted] = await delete_as_admin(second, binding)
            assert deleted == [binding]
            async with await LakelogAdmin.connect(
                first.bootstrap, security=security("alice")
            ) as alice_first:
                wait_deadline = time.monotonic() + 10
                while time.monotonic() < wait_deadline:
                    try:
                        await alice_first.describe_topics([topic_name])
                    except LakelogError as exc:
                        assert exc.error == ErrorCode.topic_authorization_failed
                        break
                    await asyncio.sleep(0.02)
                else:
                    pytest.fail("the deletion was not enforced on the first broker")
            return elapsed
        finally:
            await admin.close()
            await alice.close()

    elapsed = asyncio.run(run())
    print(f"ACL enforced on the other broker {elapsed:.3f} s after it was made")
    # The brokers poll the ACL version every 250 ms: a second on a quiet machine; the
    # bound leaves room for a busy 2-core one.
    assert elapsed < 3.0, f"enforced after {elapsed:.2f} s"


async def delete_as_admin(broker: BrokerProcess, binding: AclBinding) -> list[list[AclBinding]]:
    """Delete `binding` as the super user through `broker`."""
    async with await LakelogAdmin.connect(broker.bootstrap, security=security("admin")) as admin:
        return await admin.delete_acls(
            [
                AclFilter(
                    binding.resource_type,
                    binding.resource_name,
                    binding.pattern_type,
                    binding.principal,
                )
            ]
        )


def test_acl_admin_with_confluent_kafka(acl_broker: BrokerProcess) -> None:
    admin = AdminClient(conf(acl_broker, "admin"))
    literal = acl(ResourceType.TOPIC, "orders", AclOperation.READ)
    prefixed = acl(
        ResourceType.TOPIC,
        "ord",
        AclOperation.WRITE,
        principal="User:bob",
        pattern=ResourcePatternType.PREFIXED,
    )
    group = acl(ResourceType.GROUP, "g1", AclOperation.READ, permission=AclPermissionType.DENY)
    cluster = acl(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
    grant(acl_broker, literal, prefixed, group, cluster)

    def describe(flt: AclBindingFilter) -> set[CkAclBinding]:
        return set(admin.describe_acls(flt, request_timeout=TIMEOUT).result(TIMEOUT))

    every = every_acl()
    assert describe(every) == {literal, prefixed, group, cluster}
    match_orders = AclBindingFilter(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert describe(match_orders) == {literal, prefixed}
    only_bob = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:bob",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert describe(only_bob) == {prefixed}

    # Kafka compares a filter's principal as written: `*` is accepted (no INVALID_REQUEST)
    # and selects nothing, `User:*` selects the ACLs for everyone, not every ACL.
    everyone = acl(ResourceType.TOPIC, "public", AclOperation.READ, principal="User:*")
    grant(acl_broker, everyone)

    def by_principal(principal: str) -> AclBindingFilter:
        return AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            principal,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )

    assert describe(by_principal("*")) == set()
    assert describe(by_principal("User:*")) == {everyone}
    [deleted] = admin.delete_acls([by_principal("*")], request_timeout=TIMEOUT).values()
    assert deleted.result(TIMEOUT) == []
    [deleted] = admin.delete_acls([by_principal("User:*")], request_timeout=TIMEOUT).values()
    assert deleted.result(TIMEOUT) == [everyone]

    [deleted] = admin.delete_acls([match_orders], request_timeout=TIMEOUT).values()
    assert set(deleted.result(TIMEOUT)) == {literal, prefixed}
    assert describe(every) == {group, cluster}

    # Alice may not administer ACLs: CLUSTER_AUTHORIZATION_FAILED. (librdkafka 2.x drops
    # DescribeAcls' top-level error and reports an empty list: see the kafka-python test.)
    alice = AdminClient(conf(acl_broker, "alice"))
    assert describe(every)  # as admin, still there
    assert alice.describe_acls(every, request_timeout=TIMEOUT).result(TIMEOUT) == []
    [future] = alice.create_acls([literal], request_timeout=TIMEOUT).values()
    with pytest.raises(KafkaException) as refused:
        future.result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acl_admin_with_kafka_python(acl_broker: BrokerProcess) -> None:
    admin = kadmin.KafkaAdminClient(**kafka_python_conf(acl_broker, "admin"))
    try:
        topic_acl = kadmin.ACL(
            "User:alice",
            "*",
            kadmin.ACLOperation.READ,
            kadmin.ACLPermissionType.ALLOW,
            kadmin.ResourcePattern(
                kadmin.ResourceType.TOPIC, "events", kadmin.ACLResourcePatternType.PREFIXED
            ),
        )
        group_acl = kadmin.ACL(
            "User:alice",
            "10.1.2.3",
            kadmin.ACLOperation.DESCRIBE,
            kadmin.ACLPermissionType.ALLOW,
            kadmin.ResourcePattern(
                kadmin.ResourceType.GROUP, "g", kadmin.ACLResourcePatternType.LITERAL
            ),
        )
        created = admin.create_acls([topic_acl, group_acl])
        assert not created["failed"] and len(created["succeeded"]) == 2

        topics_only = kadmin.ACLFilter(
            None,
            None,
            kadmin.ACLOperation.ANY,
            kadmin.ACLPermissionType.ANY,
            kadmin.ResourcePatternFilter(
                kadmin.ResourceType.TOPIC, None, kadmin.ACLResourcePatternType.ANY
            ),
        )
        found, error = admin.describe_acls(topics_only)
        assert error is kafka.errors.NoError
        assert [(a.principal, a.resource_pattern.resource_name) for a in found] == [
            ("User:alice", "events")
        ]
        [(_, deleted, error)] = admin.delete_acls([topics_only])
        assert error is kafka.errors.NoError
        assert [a.resource_pattern.resource_name for a in deleted] == ["events"]
        everything = kadmin.ACLFilter(
            None,
            None,
            kadmin.ACLOperation.ANY,
            kadmin.ACLPermissionType.ANY,
            kadmin.ResourcePatternFilter(
                kadmin.ResourceType.ANY, None, kadmin.ACLResourcePatternType.ANY
            ),
        )
        found, _ = admin.describe_acls(everything)
        assert [(a.host, a.resource_pattern.resource_name) for a in found] == [("10.1.2.3", "g")]
        star = kadmin.ACLFilter(
            "*",
            None,
            kadmin.ACLOperation.ANY,
            kadmin.ACLPermissionType.ANY,
            kadmin.ResourcePatternFilter(
                kadmin.ResourceType.ANY, None, kadmin.ACLResourcePatternType.ANY
            ),
        )
        found, error = admin.describe_acls(star)  # as Kafka: accepted, selects nothing
        assert (found, error) == ([], kafka.errors.NoError)
    finally:
        admin.close()
    alice = kadmin.KafkaAdminClient(**kafka_python_conf(acl_broker, "alice"))
    try:
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            alice.describe_acls(everything)
    finally:
        alice.close()


def test_bad_create_acls_get_invalid_request(acl_broker: BrokerProcess) -> None:
    good = AclBinding(
        Rt.TOPIC, "ok", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW
    )

    def binding(kind: int, name: str, pattern: PatternType, principal: str, op: Operation) -> Any:
        return AclBinding(kind, name, pattern, principal, "*", op, Permission.ALLOW)  # type: ignore[arg-type]

    bad = [
        binding(99, "t", PatternType.LITERAL, "User:a", Operation.READ),  # unknown type
        binding(Rt.TOPIC, "t", PatternType.LITERAL, "alice", Operation.READ),  # bad principal
        binding(Rt.TOPIC, "t", PatternType.MATCH, "User:a", Operation.READ),  # MATCH in create
        binding(Rt.TOPIC, "t", PatternType.LITERAL, "User:a", Operation.ANY),  # ANY operation
        binding(Rt.CLUSTER, "c", PatternType.LITERAL, "User:a", Operation.ALTER),  # cluster name
    ]

    async def run() -> None:
        async with await LakelogAdmin.connect(
            acl_broker.bootstrap, security=security("admin")
        ) as admin:
            errors = await admin.create_acls([*bad, good])
            assert [e.error if e else None for e in errors] == [ErrorCode.invalid_request] * len(
                bad
            ) + [None]
            assert await admin.describe_acls(AclFilter()) == [good]
            with pytest.raises(LakelogError) as refused:
                await admin.describe_acls(AclFilter(pattern_type=PatternType.UNKNOWN))
            assert refused.value.error == ErrorCode.invalid_request

    asyncio.run(run())
    assert acl_broker.alive()
    assert "Traceback" not in acl_broker.log_text()


def test_acl_apis_without_the_authorizer(broker: BrokerProcess) -> None:
    async def run() -> None:
        async with await LakelogAdmin.connect(broker.bootstrap) as admin:
            with pytest.raises(LakelogError) as refused:
                await admin.describe_acls(AclFilter())
            assert refused.value.error == ErrorCode.security_disabled
            binding = AclBinding(
                Rt.TOPIC, "t", PatternType.LITERAL, "User:a", "*", Operation.READ, Permission.ALLOW
            )
            [error] = await admin.create_acls([binding])
            assert error is not None and error.error == ErrorCode.security_disabled

    asyncio.run(run())
    wait_until(broker.alive, 1, "the broker to be up")


def test_create_rights(acl_broker: BrokerProcess) -> None:
    grant(
        acl_broker,
        acl(ResourceType.TOPIC, "own-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, "own-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, "seen", AclOperation.WRITE),
    )
    alice = AdminClient(conf(acl_broker, "alice"))
    futures = alice.create_topics([NewTopic("own-1", 1, 1), NewTopic("theirs", 1, 1)])
    assert futures["own-1"].result(TIMEOUT) is None
    with pytest.raises(KafkaException) as refused:
        futures["theirs"].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Auto-creation by Metadata needs CREATE too: WRITE (so DESCRIBE) alone is refused...
    err = produce(acl_broker, "alice", "seen", b"not created")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ...and with CREATE on the prefix the producer's first Metadata creates it.
    assert produce(acl_broker, "alice", "own-auto", b"created") is None
    assert "own-auto" in AdminClient(conf(acl_broker, "admin")).list_topics(timeout=TIMEOUT).topics


def test_authorized_operations_follow_the_acls(acl_broker: BrokerProcess) -> None:
    create_topics(acl_broker, "ops-t")
    grant(
        acl_broker,
        acl(ResourceType.TOPIC, "ops-t", AclOperation.READ),
        acl(ResourceType.TOPIC, "ops-t", AclOperation.ALTER_CONFIGS),
        acl(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
    )
    alice = AdminClient(conf(acl_broker, "alice"))
    [future] = alice.describe_topics(
        TopicCollection(["ops-t"]), include_authorized_operations=True, request_timeout=TIMEOUT
    ).values()
    assert set(future.result(TIMEOUT).authorized_operations) == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
    }
    cluster = alice.describe_cluster(
        include_authorized_operations=True, request_timeout=TIMEOUT
    ).result(TIMEOUT)
    assert set(cluster.authorized_operations) == {AclOperation.DESCRIBE}
    admin = AdminClient(conf(acl_broker, "admin"))
    everything = admin.describe_cluster(
        include_authorized_operations=True, request_timeout=TIMEOUT
    ).result(TIMEOUT)
    assert AclOperation.ALTER in everything.authorized_operations  # a super user


def test_idempotent_and_transactional_producers(acl_broker: BrokerProcess) -> None:
    create_topics(acl_broker, "txn-t")
    grant(acl_broker, acl(ResourceType.TOPIC, "txn-t", AclOperation.WRITE))
    # Idempotence needs IDEMPOTENT_WRITE on the cluster or, since KIP-679, WRITE on a topic.
    producer = Producer(
        {**conf(acl_broker, "alice"), "enable.idempotence": True, "message.timeout.ms": 15_000}
    )
    delivered: list[KafkaError | None] = []
    producer.produce("txn-t", b"idempotent", on_delivery=lambda err, _m: delivered.append(err))
    producer.flush(TIMEOUT)
    assert delivered == [None]
    # A transactional id needs WRITE on it.
    txn = Producer({**conf(acl_broker, "alice"), "transactional.id": "alice-tx"})
    with pytest.raises(KafkaException) as refused:
        txn.init_transactions(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(acl_broker, acl(ResourceType.TRANSACTIONAL_ID, "alice-", AclOperation.WRITE,
                          pattern=ResourcePatternType.PREFIXED))  # fmt: skip
    txn = Producer({**conf(acl_broker, "alice"), "transactional.id": "alice-tx2"})
    txn.init_transactions(TIMEOUT)
    txn.begin_transaction()
    txn.produce("txn-t", b"in a transaction")
    txn.commit_transaction(TIMEOUT)


def test_broker_configs_name_the_authorizer(acl_broker: BrokerProcess) -> None:
    """Tools read authorizer.class.name to tell "no ACLs" from "may not list them"."""
    admin = AdminClient(conf(acl_broker, "admin"))
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    [future] = admin.describe_configs([resource], request_timeout=TIMEOUT).values()
    entries = future.result(TIMEOUT)
    assert entries["authorizer.class.name"].value.endswith("StandardAuthorizer")
    assert entries["super.users"].value == "User:admin"
    assert entries["allow.everyone.if.no.acl.found"].value == "false"


def test_group_listing_and_description_follow_the_acls(acl_broker: BrokerProcess) -> None:
    create_topics(acl_broker, "grp-t")
    assert produce(acl_broker, "admin", "grp-t", b"x") is None
    for group in ("g-alice", "g-other"):
        got, errors = consume(acl_broker, "admin", group, ["grp-t"], 1)
        assert got == [b"x"] and not errors
    grant(acl_broker, acl(ResourceType.GROUP, "g-alice", AclOperation.DESCRIBE))
    alice = AdminClient(conf(acl_broker, "alice"))
    listed = alice.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [g.group_id for g in listed.valid] == ["g-alice"]
    futures = alice.describe_consumer_groups(["g-alice", "g-other"], request_timeout=TIMEOUT)
    assert futures["g-alice"].result(TIMEOUT).group_id == "g-alice"
    with pytest.raises(KafkaException) as refused:
        futures["g-other"].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    admin = AdminClient(conf(acl_broker, "admin"))
    every = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
    assert {g.group_id for g in every.valid} == {"g-alice", "g-other"}


def test_kip848_regex_subscription_gets_only_describable_topics(
    acl_broker: BrokerProcess,
) -> None:
    """A KIP-848 consumer subscribed by regex is assigned only the matching topics its
    principal may DESCRIBE (as Kafka filters server-side regex matches): it reads those,
    gets no authorization errors, and the group's assignment never names the others."""
    create_topics(acl_broker, "rx-ok-1", "rx-no-1")
    assert produce(acl_broker, "admin", "rx-no-1", b"hidden") is None
    assert produce(acl_broker, "admin", "rx-ok-1", b"visible") is None
    grant(
        acl_broker,
        acl(ResourceType.TOPIC, "rx-ok", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.GROUP, "rx-group", AclOperation.READ),
    )
    consumer = Consumer(
        {
            **conf(acl_broker, "alice"),
            "group.id": "rx-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    got: list[bytes] = []
    errors: list[KafkaError] = []
    try:
        consumer.subscribe(["^rx-.*"])
        deadline = time.monotonic() + TIMEOUT
        quiet_until = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                if message.error() is not None:
                    if message.error().code() in AUTH_ERRORS:
                        errors.append(message.error())
                else:
                    got.append(message.value())
            if got and quiet_until is None:
                quiet_until = time.monotonic() + 3  # time for anything else to arrive
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
        admin = AdminClient(conf(acl_broker, "admin"))
        [described] = admin.describe_consumer_groups(["rx-group"], request_timeout=TIMEOUT).values()
        members = described.result(TIMEOUT).members
    finally:
        consumer.close()
    assert got == [b"visible"] and not errors, (got, errors)
    assigned = {tp.topic for m in members for tp in m.assignment.topic_partitions}
    assert assigned == {"rx-ok-1"}


def test_scram_users_need_cluster_alter_and_describe(acl_broker: BrokerProcess) -> None:
    """Managing SCRAM users is Kafka's ALTER (and DESCRIBE) on the cluster: refused to a
    principal without them, allowed to the super user."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-secret"
    )
    alice = AdminClient(conf(acl_broker, "alice"))
    with pytest.raises(KafkaException) as refused:
        alice.alter_user_scram_credentials([upsert])["carol"].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # (kafka-python here: confluent-kafka 2.16 crashes the process, in C, on a
    # DescribeUserScramCredentials answer with a top-level error, as Kafka's would be)
    client = kadmin.KafkaAdminClient(**kafka_python_conf(acl_broker, "alice"))
    try:
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            client.describe_user_scram_credentials(["carol"])
    finally:
        client.close()

    admin = AdminClient(conf(acl_broker, "admin"))
    admin.alter_user_scram_credentials([upsert])["carol"].result(TIMEOUT)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]


def _share_poll(
    broker: BrokerProcess, user: str, group: str, topic: str, want: int, seconds: float
) -> tuple[list[bytes], list[KafkaError]]:
    """What a share consumer of `user` receives (values and errors) within `seconds`."""
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({**conf(broker, user), "group.id": group})
    consumer.subscribe([topic])
    got: list[bytes] = []
    errors: list[KafkaError] = []
    deadline = time.monotonic() + seconds
    try:
        while len(got) < want and time.monotonic() < deadline:
            try:
                messages = consumer.poll(0.5)
            except KafkaException as exc:
                errors.append(exc.args[0])
                continue
            for m in messages or ():
                if m.error() is None:
                    got.append(m.value())
                else:
                    errors.append(m.error())
    finally:
        consumer.close()
    return got, errors


def test_share_groups_need_read_on_the_group_and_the_topic(acl_broker: BrokerProcess) -> None:
    """A share consumer without ACLs gets nothing; READ on its group and topic lets it
    consume (KIP-932's checks: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic, group = "shared-acl", "sharers"
    create_topics(acl_broker, topic)
    admin = AdminClient(conf(acl_broker, "admin"))
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    for i in range(3):
        assert produce(acl_broker, "admin", topic, b"s%d" % i) is None

    got, errors = _share_poll(acl_broker, "alice", group, topic, 3, 8)
    assert got == []
    auth_failures = {KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert all(e.code() in auth_failures for e in errors), errors

    grant(
        acl_broker,
        acl(ResourceType.GROUP, group, AclOperation.READ),
        acl(ResourceType.TOPIC, topic, AclOperation.READ),
    )
    got, errors = _share_poll(acl_broker, "alice", group, topic, 3, TIMEOUT)
    assert sorted(got) == [b"s0", b"s1", b"s2"], errors
    assert "Traceback" not in acl_broker.log_text()


def _command_config(tmp_path: Path, user: str) -> Path:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{USERS[user]}";\n'
        f"ssl.ca.location={_ca()}\n"
    )
    return path


def test_lakelog_acls_with_command_config(acl_broker: BrokerProcess, tmp_path: Path) -> None:
    """`lakelog acls` logs in with --command-config (Kafka's client properties): the super
    user adds and lists ACLs; a user without cluster rights is refused in one line."""

    def lakelog_acls(user: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "lakelog",
                "acls",
                *args,
                "-b",
                acl_broker.bootstrap,
                "--command-config",
                str(_command_config(tmp_path, user)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )

    added = lakelog_acls(
        "admin", "--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "cli-t"
    )
    assert added.returncode == 0, added.stdout + added.stderr
    listed = lakelog_acls("admin", "--list", "--topic", "cli-t", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "User:bob" in listed.stdout and "READ" in listed.stdout.upper()
    refused = lakelog_acls("alice", "--list")
    assert refused.returncode != 0
    assert (
        "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr.upper()
        and "Traceback" not in refused.stderr
    )
