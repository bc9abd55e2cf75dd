"""The capture's workloads: what each client does against a broker while
`capture_corpus.py` records its requests. One function per client, each a list of small
steps; a step that fails is recorded and the workload goes on, so one client's gap does not
cost the rest of its frames."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for extra in (REPO, REPO / "tests" / "e2e"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from security_support import every_acl  # noqa: E402

USER, PASSWORD = "alice", "alice-secret"


Step = Callable[[], Any]


@contextlib.contextmanager
def _step(client: str, name: str, failures: list[str], trace: bool = True) -> Iterator[None]:
    """Time one workload step and print how it went; a failure is recorded, not raised."""
    started = time.monotonic()
    try:
        yield
        print(f"  {client}: {name} ok ({time.monotonic() - started:.1f}s)", flush=True)
    except Exception as exc:
        failures.append(f"{client}: {name}: {exc!r}")
        print(f"  {client}: {name} FAILED: {exc!r}", flush=True)
        if trace:
            traceback.print_exc(limit=4)  # this frame, then the 3 the loop printed before


def _run_steps(client: str, steps: list[tuple[str, Step]], failures: list[str]) -> None:
    for name, step in steps:
        with _step(client, name, failures):
            step()


def kafka_python_workload(
    bootstrap: str,
    tag: str,
    failures: list[str],
    sasl: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    import kafka
    from kafka import TopicPartition
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        OffsetSpec,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.structs import OffsetAndMetadata

    common: dict[str, Any] = {"bootstrap_servers": bootstrap, "request_timeout_ms": 15000}
    common |= (sasl or {}) | (extra or {})
    topic, other, group = f"kp-{tag}", f"kp-other-{tag}", f"kp-group-{tag}"
    if sasl:
        producer = kafka.KafkaProducer(**common, linger_ms=5)
        producer.send(topic, b"sasl-value").get(30)
        producer.close(5)
        return
    admin = KafkaAdminClient(**common, client_id="kp-admin")
    state: dict[str, Any] = {}

    def produce(**conf: Any) -> None:
        producer = kafka.KafkaProducer(**common, linger_ms=5, **conf)
        for i in range(20):
            producer.send(topic, key=f"k{i}".encode(), value=b"v" * (i % 7), partition=i % 3)
        producer.flush(30)
        producer.close(5)

    def transactional() -> None:
        producer = kafka.KafkaProducer(
            **common, transactional_id=f"kp-tx-{tag}", linger_ms=5, enable_idempotence=True
        )
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"tx-commit", partition=0)
        producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)}, group
        )
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"tx-abort", partition=1)
        producer.flush(10)
        producer.abort_transaction()
        producer.close(5)

    def consume() -> None:
        consumer = kafka.KafkaConsumer(
            topic,
            **common,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=4000,
            isolation_level="read_committed",
        )
        for seen, _ in enumerate(consumer, 1):
            if seen % 10 == 0:
                consumer.commit()
        consumer.commit()
        parts = [TopicPartition(topic, p) for p in range(3)]
        consumer.committed(parts[0])
        consumer.beginning_offsets(parts)
        consumer.end_offsets(parts)
        consumer.offsets_for_times({p: 0 for p in parts})
        consumer.close()
        assign = kafka.KafkaConsumer(**common, group_id=None, consumer_timeout_ms=1500)
        assign.assign(parts)
        assign.seek_to_beginning()
        for _ in assign:
            pass
        assign.close()

    def committed_admin() -> None:
        admin.list_groups()
        admin.describe_groups([group])
        admin.list_group_offsets({group: None})
        tp = TopicPartition(topic, 0)
        admin.alter_group_offsets(group, {tp: OffsetAndMetadata(2, "m", -1)})
        admin.delete_group_offsets(group, [tp])
        admin.list_partition_offsets(
            {TopicPartition(topic, p): OffsetSpec.LATEST for p in range(3)}
        )
        admin.delete_groups([group])

    def acls() -> None:
        pattern = ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)
        acl = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
        admin.create_acls([acl])
        every = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        admin.describe_acls(every)
        admin.delete_acls([every])

    steps: list[tuple[str, Step]] = [
        ("api_versions", admin.api_versions),
        (
            "create_topics",
            lambda: admin.create_topics(
                {
                    topic: {
                        "num_partitions": 3,
                        "replication_factor": 1,
                        "configs": {"retention.ms": "3600000"},
                    },
                    other: {"num_partitions": 1, "replication_factor": 1},
                },
                timeout_ms=15000,
            ),
        ),
        (
            "create_topics_validate",
            lambda: admin.create_topics([f"kp-v-{tag}"], validate_only=True),
        ),
        ("wait_for_topics", lambda: admin.wait_for_topics([topic, other], timeout_ms=15000)),
        ("list_topics", admin.list_topics),
        ("describe_topics", lambda: admin.describe_topics([topic])),
        ("describe_cluster", admin.describe_cluster),
        (
            "describe_configs",
            lambda: admin.describe_configs(
                [
                    ConfigResource(ConfigResourceType.TOPIC, topic),
                    ConfigResource(ConfigResourceType.BROKER, "0"),
                ],
                include_synonyms=True,
            ),
        ),
        (
            "alter_configs",
            lambda: admin.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"}
                    )
                ]
            ),
        ),
        (
            "alter_configs_legacy",
            lambda: admin.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, other, configs={"retention.ms": "1000000"}
                    )
                ],
                incremental=False,
            ),
        ),
        ("create_partitions", lambda: admin.create_partitions({other: 2})),
        ("produce_idempotent", lambda: produce()),
        ("produce_plain", lambda: produce(enable_idempotence=False, acks=1)),
        ("produce_gzip", lambda: produce(enable_idempotence=False, compression_type="gzip")),
        ("produce_acks0", lambda: produce(enable_idempotence=False, acks=0)),
        ("transactional", transactional),
        ("consume", consume),
        ("group_admin", committed_admin),
        ("list_transactions", admin.list_transactions),
        ("describe_transactions", lambda: admin.describe_transactions([f"kp-tx-{tag}"])),
        ("describe_producers", lambda: admin.describe_producers([TopicPartition(topic, 0)])),
        ("delete_records", lambda: admin.delete_records({TopicPartition(topic, 0): 1})),
        (
            "describe_topic_partitions",
            lambda: admin.describe_topic_partitions([topic, other], response_partition_limit=1),
        ),
        ("describe_log_dirs", lambda: admin.describe_log_dirs({topic: [0, 1]})),
        ("elect_leaders", lambda: admin.elect_leaders(0, {topic: [0]})),
        ("list_partition_reassignments", admin.list_partition_reassignments),
        (
            "alter_partition_reassignments",
            lambda: admin.alter_partition_reassignments(
                {TopicPartition(topic, 0): [0], TopicPartition(topic, 1): None}
            ),
        ),
        ("describe_metadata_quorum", admin.describe_metadata_quorum),
        ("acls", acls),
        ("delete_topics", lambda: admin.delete_topics([other], timeout_ms=15000)),
    ]
    _run_steps("kafka-python", steps, failures)
    state.clear()
    admin.close()


def confluent_workload(
    bootstrap: str, tag: str, failures: list[str], sasl: dict[str, Any] | None = None
) -> None:
    from confluent_kafka import (
        AcknowledgeType,
        Consumer,
        ConsumerGroupTopicPartitions,
        ElectionType,
        IsolationLevel,
        Producer,
        ShareConsumer,
        TopicCollection,
        TopicPartition,
    )
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    common: dict[str, Any] = {"bootstrap.servers": bootstrap} | (sasl or {})
    topic, other, group = f"ck-{tag}", f"ck-other-{tag}", f"ck-group-{tag}"
    if sasl:
        producer = Producer({**common, "linger.ms": 5})
        producer.produce(topic, b"sasl-value")
        if producer.flush(30) != 0:
            raise RuntimeError("not delivered over SASL")
        return
    admin = AdminClient(common)

    def wait(futures: Any) -> None:
        if isinstance(futures, dict):
            for future in futures.values():
                future.result(timeout=20)
        else:
            futures.result(timeout=20)

    def produce(**conf: Any) -> None:
        producer = Producer({**common, "linger.ms": 5, **conf})
        for i in range(20):
            producer.produce(topic, key=f"k{i}".encode(), value=b"v" * (i % 7), partition=i % 3)
        if producer.flush(30) != 0:
            raise RuntimeError("not all delivered")

    def transactional() -> None:
        producer = Producer({**common, "transactional.id": f"ck-tx-{tag}", "linger.ms": 5})
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce(topic, b"tx-commit", partition=0)
        consumer = Consumer({**common, "group.id": group, "enable.auto.commit": False})
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), 20
        )
        consumer.close()
        producer.commit_transaction(20)
        producer.begin_transaction()
        producer.produce(topic, b"tx-abort", partition=1)
        producer.flush(10)
        producer.abort_transaction(20)

    def consume() -> None:
        consumer = Consumer(
            {
                **common,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe([topic])
        deadline = time.monotonic() + 12
        seen = 0
        while time.monotonic() < deadline and seen < 60:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
                if seen % 10 == 0:
                    consumer.commit(asynchronous=False)
        parts = [TopicPartition(topic, p) for p in range(3)]
        consumer.committed(parts, timeout=10)
        consumer.get_watermark_offsets(parts[0], timeout=10)
        consumer.offsets_for_times([TopicPartition(topic, p, 0) for p in range(3)], timeout=10)
        consumer.close()

    def kip848_consume() -> None:
        """The KIP-848 protocol: ConsumerGroupHeartbeat, then ConsumerGroupDescribe."""
        consumer = Consumer(
            {
                **common,
                "group.id": f"{group}-848",
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        deadline, seen = time.monotonic() + 15, 0
        while time.monotonic() < deadline and seen < 20:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        consumer.close()
        wait(admin.describe_consumer_groups([f"{group}-848"]))

    def share_consume() -> None:
        """KIP-932: group configs, ShareGroupHeartbeat, ShareFetch, ShareAcknowledge."""
        share_group = f"{group}-share"
        resource = ConfigResource(
            ResourceType.GROUP,
            share_group,
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        wait(admin.incremental_alter_configs([resource]))
        consumer = ShareConsumer(
            {**common, "group.id": share_group, "share.acknowledgement.mode": "explicit"}
        )
        consumer.subscribe([topic])
        kinds = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
        deadline, seen = time.monotonic() + 15, 0
        while time.monotonic() < deadline and seen < 20:
            messages = [m for m in consumer.poll(0.5) if m.error() is None]
            for m in messages:
                consumer.acknowledge(m, kinds[seen % 3])
                seen += 1
            if messages:
                consumer.commit_sync(20)
        consumer.close()

    def acls() -> None:
        binding = AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        every = every_acl()
        wait(admin.create_acls([binding]))
        admin.describe_acls(every).result(timeout=20)
        wait(admin.delete_acls([every]))

    def scram() -> None:
        user = f"ck-user-{tag}"
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
        wait(admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, b"pw")]))
        wait(admin.describe_user_scram_credentials([user]))
        deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
        wait(admin.alter_user_scram_credentials([deletion]))

    def group_admin() -> None:
        admin.list_consumer_groups().result(timeout=20)
        wait(admin.describe_consumer_groups([group]))
        wait(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]))
        wait(
            admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 2)])]
            )
        )
        wait(admin.delete_consumer_groups([group]))

    steps: list[tuple[str, Step]] = [
        (
            "create_topics",
            lambda: wait(
                admin.create_topics(
                    [
                        NewTopic(topic, 3, 1, config={"retention.ms": "3600000"}),
                        NewTopic(other, 1, 1),
                    ]
                )
            ),
        ),
        (
            "create_topics_validate",
            lambda: wait(admin.create_topics([NewTopic(f"ck-v-{tag}", 2, 1)], validate_only=True)),
        ),
        ("list_topics", lambda: admin.list_topics(timeout=10)),
        (
            "describe_topics",
            lambda: wait(admin.describe_topics(TopicCollection([topic]))),
        ),
        ("describe_cluster", lambda: admin.describe_cluster().result(timeout=20)),
        (
            "elect_leaders",
            lambda: admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(
                timeout=20
            ),
        ),
        (
            "describe_configs",
            lambda: wait(
                admin.describe_configs(
                    [ConfigResource("topic", topic), ConfigResource("broker", "0")]
                )
            ),
        ),
        (
            "alter_configs",
            lambda: wait(
                admin.alter_configs(
                    [ConfigResource("topic", other, set_config={"retention.ms": "1000000"})]
                )
            ),
        ),
        (
            "incremental_alter_configs",
            lambda: wait(
                admin.incremental_alter_configs(
                    [
                        ConfigResource(
                            "topic",
                            topic,
                            incremental_configs=[
                                ConfigEntry(
                                    "retention.ms",
                                    "7200000",
                                    incremental_operation=AlterConfigOpType.SET,
                                )
                            ],
                        )
                    ]
                )
            ),
        ),
        ("create_partitions", lambda: wait(admin.create_partitions([NewPartitions(other, 2)]))),
        ("produce_plain", lambda: produce(**{"enable.idempotence": False, "acks": 1})),
        ("produce_idempotent", lambda: produce(**{"enable.idempotence": True})),
        ("produce_lz4", lambda: produce(**{"compression.type": "lz4"})),
        ("produce_zstd", lambda: produce(**{"compression.type": "zstd"})),
        ("transactional", transactional),
        ("consume", consume),
        ("kip848_consume", kip848_consume),
        ("share_consume", share_consume),
        ("group_admin", group_admin),
        ("acls", acls),
        ("scram", scram),
        (
            "list_offsets",
            lambda: wait(
                admin.list_offsets(
                    {TopicPartition(topic, 0): OffsetSpec.latest()},
                    isolation_level=IsolationLevel.READ_COMMITTED,
                )
            ),
        ),
        ("delete_records", lambda: wait(admin.delete_records([TopicPartition(topic, 0, 1)]))),
        ("delete_topics", lambda: wait(admin.delete_topics([other], operation_timeout=15))),
    ]
    _run_steps("confluent-kafka", steps, failures)


def aiokafka_workload(
    bootstrap: str, tag: str, failures: list[str], sasl: dict[str, Any] | None = None
) -> None:
    asyncio.run(_aiokafka(bootstrap, tag, failures, sasl))


async def _aiokafka(
    bootstrap: str, tag: str, failures: list[str], sasl: dict[str, Any] | None
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    common: dict[str, Any] = {"bootstrap_servers": bootstrap, "request_timeout_ms": 15000}
    common |= sasl or {}
    topic, other, group = f"ak-{tag}", f"ak-other-{tag}", f"ak-group-{tag}"
    if sasl:
        producer = AIOKafkaProducer(**common)
        await producer.start()
        await producer.send_and_wait(topic, b"sasl-value")
        await producer.stop()
        return
    admin = AIOKafkaAdminClient(**common)
    await admin.start()

    async def produce(**conf: Any) -> None:
        producer = AIOKafkaProducer(**common, linger_ms=5, **conf)
        await producer.start()
        try:
            for i in range(20):
                await producer.send(
                    topic, key=f"k{i}".encode(), value=b"v" * (i % 7), partition=i % 3
                )
            await producer.flush()
        finally:
            await producer.stop()

    async def transactional() -> None:
        producer = AIOKafkaProducer(**common, transactional_id=f"ak-tx-{tag}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"tx-commit", partition=0)
                await producer.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, group)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"tx-abort", partition=1)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    async def consume() -> None:
        consumer = AIOKafkaConsumer(
            topic,
            **common,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            seen = 0
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline and seen < 60:
                batch = await consumer.getmany(timeout_ms=500)
                seen += sum(len(v) for v in batch.values())
                if batch:
                    await consumer.commit()
            parts = [TopicPartition(topic, p) for p in range(3)]
            await consumer.committed(parts[0])
            await consumer.beginning_offsets(parts)
            await consumer.end_offsets(parts)
            await consumer.offsets_for_times({p: 0 for p in parts})
        finally:
            await consumer.stop()

    steps: list[tuple[str, Any]] = [
        (
            "create_topics",
            lambda: admin.create_topics(
                [
                    NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"}),
                    NewTopic(other, 1, 1),
                ]
            ),
        ),
        ("list_topics", admin.list_topics),
        ("describe_topics", lambda: admin.describe_topics([topic])),
        ("describe_cluster", admin.describe_cluster),
        (
            "describe_configs",
            lambda: admin.describe_configs(
                [
                    ConfigResource(ConfigResourceType.TOPIC, topic),
                    ConfigResource(ConfigResourceType.BROKER, "0"),
                ],
                include_synonyms=True,
            ),
        ),
        (
            "alter_configs",
            lambda: admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, other, {"retention.ms": "1000000"})]
            ),
        ),
        ("create_partitions", lambda: admin.create_partitions({other: NewPartitions(2)})),
        ("produce_plain", lambda: produce(acks=1)),
        ("produce_idempotent", lambda: produce(enable_idempotence=True)),
        ("produce_snappy", lambda: produce(compression_type="snappy")),
        ("transactional", transactional),
        ("consume", consume),
        ("list_consumer_groups", admin.list_consumer_groups),
        ("describe_consumer_groups", lambda: admin.describe_consumer_groups([group])),
        ("list_group_offsets", lambda: admin.list_consumer_group_offsets(group)),
        ("find_coordinator", lambda: admin.find_coordinator(group)),
        (
            "delete_records",
            lambda: admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(1)}),
        ),
        ("delete_topics", lambda: admin.delete_topics([other])),
    ]
    for name, step in steps:
        with _step("aiokafka", name, failures, trace=False):
            await asyncio.wait_for(step(), 40)
    await admin.close()


def lakelog_workload(
    bootstrap: str, tag: str, failures: list[str], sasl: dict[str, Any] | None = None
) -> None:
    """What the libraries' workloads do not send: the share-group admin APIs
    (ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets) through `lakelog
    share-groups`' own client, and OffsetForLeaderEpoch (clients send it only after a
    leader epoch change, which a leaderless cluster does not have)."""
    if sasl:
        return
    asyncio.run(_lakelog(bootstrap, tag, failures))


async def _lakelog(bootstrap: str, tag: str, failures: list[str]) -> None:
    from confluent_kafka import ShareConsumer

    from lakelog.admin import share_client as share
    from lakelog.admin.client import AdminClient

    topic, group = f"ll-{tag}", f"ll-share-{tag}"
    admin = await AdminClient.connect(bootstrap, client_id="lakelog-admin")

    def join_and_leave() -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        for _ in range(6):
            consumer.poll(0.5)
        consumer.close()

    async def offset_for_leader_epoch() -> None:
        from kio.schema.offset_for_leader_epoch.v4 import request as m

        from lakelog.server.api.context import build

        asked = build(
            m.OffsetForLeaderEpochRequest,
            replica_id=-1,
            topics=(
                build(
                    m.OffsetForLeaderTopic,
                    topic=topic,
                    partitions=tuple(
                        build(
                            m.OffsetForLeaderPartition,
                            partition=p,
                            current_leader_epoch=-1,
                            leader_epoch=0,
                        )
                        for p in (0, 1)
                    ),
                ),
            ),
        )
        await admin._roundtrip(23, 4, asked)

    async def describe() -> None:
        await share.describe_share_group(admin, group)
        await share.share_offsets(admin, group)
        await share.share_offsets(admin, group, {topic: [0, 1]})

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("create_topic", lambda: admin.create_topic(topic, 2)),
        ("offset_for_leader_epoch", offset_for_leader_epoch),
        ("share_group", lambda: asyncio.to_thread(join_and_leave)),
        ("describe", describe),
        (
            "alter_offsets",
            lambda: share.alter_share_offsets(admin, group, {(topic, 0): 0}),
        ),
        ("delete_offsets", lambda: share.delete_share_offsets(admin, group, [topic])),
    ]
    try:
        for name, step in steps:
            with _step("lakelog", name, failures, trace=False):
                await asyncio.wait_for(step(), 40)
    finally:
        await admin.close()


WORKLOADS = {
    "kafka-python": kafka_python_workload,
    "confluent-kafka": confluent_workload,
    "aiokafka": aiokafka_workload,
    "lakelog": lakelog_workload,
}


def sasl_settings(client: str, mechanism: str) -> dict[str, Any]:
    if client == "confluent-kafka":
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
    }
