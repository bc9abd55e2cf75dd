"""Consumer-group members for the group tests: one real client consumer per thread.

Every member subscribes to one topic, records what it consumed and every assignment change
its client reported, and commits synchronously after processing each batch (so at any
rebalance everything it processed is committed, and a correct broker lets the group consume
each record exactly once). Three clients behind one interface: kafka-python, confluent-kafka
(librdkafka) and aiokafka (its own event loop in the member's thread).

Also: a producer that returns where each record landed, the consumer-protocol encodings that
raw JoinGroup/SyncGroup requests need, and a raw Heartbeat probe that reveals a group's
generation (DescribeGroups does not report it).
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from e2e_harness import wait_until

CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Seen:
    """One consumed record and who consumed it."""

    partition: int
    offset: int
    value: bytes
    member: str


@dataclass(frozen=True, slots=True)
class RebalanceEvent:
    """What a client's rebalance callback reported, with the member's assignment after it."""

    kind: str  # "assign" | "revoke" | "lost"
    partitions: frozenset[int]
    at: float


class GroupMember:
    """One consumer in one thread; subclasses drive one client library.

    `stop_after`: leave the group (close) by itself after consuming that many records, in the
    middle of the stream, so its partitions move with uncommitted-by-nobody records left."""

    client = ""

    def librdkafka_callbacks(self) -> dict[str, Any]:
        """confluent-kafka's rebalance callbacks, recorded as events."""

        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            self._event("assign", (tp.partition for tp in partitions))

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            self._event("revoke", (tp.partition for tp in partitions))

        def on_lost(consumer: Any, partitions: list[Any]) -> None:
            self._event("lost", (tp.partition for tp in partitions))

        return {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        name: str,
        *,
        session_timeout_ms: int = 6000,
        heartbeat_interval_ms: int = 500,
        batch: int = 100,
        assignor: str | None = None,
        instance_id: str | None = None,
        stop_after: int | None = None,
        pause_s: float = 0.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.name = name
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.batch = batch
        self.assignor = assignor
        self.instance_id = instance_id
        self.stop_after = stop_after
        self.pause_s = pause_s
        """Sleep after each processed batch: slows a member down so a test can act mid-stream."""
        self.lock = threading.Lock()
        self.seen: list[Seen] = []
        self.events: list[RebalanceEvent] = []
        self._assignment: frozenset[int] = frozenset()
        self.committed: dict[int, int] = {}
        """Per partition, the last offset a commit acknowledged (the next one to read)."""
        self.commit_failures: list[str] = []
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.closed = threading.Event()
        self.closed_at: float | None = None
        self.crashed: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=f"member-{name}", daemon=True)

    # -- control (test thread)
    def start(self) -> GroupMember:
        self.thread.start()
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Ask the loop to finish, close the consumer, and join the thread."""
        self.stop_event.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise TimeoutError(f"member {self.name} did not stop within {timeout:.0f}s")

    @property
    def assignment(self) -> frozenset[int]:
        with self.lock:
            return self._assignment

    def seen_count(self) -> int:
        with self.lock:
            return len(self.seen)

    def event_count(self) -> int:
        with self.lock:
            return len(self.events)

    def check_healthy(self) -> None:
        """Raise if the member's thread died; a failing predicate shows why."""
        if self.crashed is not None:
            raise AssertionError(f"member {self.name} crashed: {self.crashed!r}")

    def describe(self) -> str:
        with self.lock:
            return (
                f"{self.name}: assignment={sorted(self._assignment)} seen={len(self.seen)} "
                f"events={[(e.kind, sorted(e.partitions)) for e in self.events]} "
                f"commit_failures={self.commit_failures[:5]} errors={self.errors[:5]} "
                f"crashed={self.crashed!r}"
            )

    # -- callbacks and bookkeeping (member thread)
    def _event(self, kind: str, partitions: Iterable[int]) -> None:
        with self.lock:
            self.events.append(RebalanceEvent(kind, frozenset(partitions), time.monotonic()))

    def _set_assignment(self, partitions: Iterable[int]) -> None:
        with self.lock:
            self._assignment = frozenset(partitions)

    def _record(self, records: Sequence[tuple[int, int, bytes]]) -> None:
        with self.lock:
            self.seen.extend(Seen(p, o, v, self.name) for p, o, v in records)

    def _committed_ok(self, offsets: dict[int, int]) -> None:
        with self.lock:
            self.committed.update(offsets)

    def _should_stop(self) -> bool:
        if self.stop_event.is_set():
            return True
        return self.stop_after is not None and self.seen_count() >= self.stop_after

    def _pause(self) -> None:
        if self.pause_s:
            self.stop_event.wait(self.pause_s)

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported through check_healthy / describe
            self.crashed = exc
        finally:
            self.closed_at = time.monotonic()
            self.closed.set()

    def _run(self) -> None:
        """Each client's consume loop; the subclasses below are the real members."""
        raise NotImplementedError


def _next_offsets(records: Sequence[tuple[int, int, bytes]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o, _ in records:
        out[p] = max(out.get(p, 0), o + 1)
    return out


# ------------------------------------------------------------------- kafka-python


class KafkaPythonMember(GroupMember):
    client = "kafka-python"

    def _run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member._event("revoke", (tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned: Any) -> None:
                member._event("assign", (tp.partition for tp in assigned))

        kwargs: dict[str, Any] = {}
        if self.instance_id is not None:
            kwargs["group_instance_id"] = self.instance_id
        if self.assignor == "roundrobin":
            from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

            kwargs["partition_assignment_strategy"] = [RoundRobinPartitionAssignor]
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            max_poll_records=self.batch,
            fetch_max_wait_ms=100,
            **kwargs,
        )
        try:
            consumer.subscribe(topics=[self.topic], listener=Listener())
            while not self._should_stop():
                polled = consumer.poll(timeout_ms=200)
                self._set_assignment(tp.partition for tp in consumer.assignment())
                records = [
                    (tp.partition, r.offset, r.value) for tp, rs in polled.items() for r in rs
                ]
                if not records:
                    continue
                self._record(records)
                offsets = _next_offsets(records)
                try:
                    consumer.commit(
                        {
                            TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                            for p, o in offsets.items()
                        }
                    )
                except KafkaError as exc:
                    self.commit_failures.append(repr(exc))
                else:
                    self._committed_ok(offsets)
                self._pause()
        finally:
            consumer.close(autocommit=False)


# ------------------------------------------------------------------- confluent-kafka


class ConfluentMember(GroupMember):
    client = "confluent-kafka"

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": self.heartbeat_interval_ms,
            "fetch.wait.max.ms": 100,
            "partition.assignment.strategy": self.assignor or "range",
        }
        if self.instance_id is not None:
            conf["group.instance.id"] = self.instance_id

        consumer = Consumer(conf)
        try:
            consumer.subscribe([self.topic], **self.librdkafka_callbacks())
            while not self._should_stop():
                msgs = consumer.consume(num_messages=self.batch, timeout=0.2)
                self._set_assignment(tp.partition for tp in consumer.assignment())
                records = []
                for m in msgs:
                    if m.error():
                        self.errors.append(str(m.error()))
                        continue
                    records.append((m.partition(), m.offset(), m.value()))
                if not records:
                    continue
                self._record(records)
                offsets = _next_offsets(records)
                try:
                    result = consumer.commit(
                        offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                        asynchronous=False,
                    )
                except KafkaException as exc:
                    self.commit_failures.append(repr(exc))
                    continue
                failed = [f"{tp.partition}: {tp.error}" for tp in result or () if tp.error]
                if failed:
                    self.commit_failures.append(f"partition errors {failed}")
                else:
                    self._committed_ok(offsets)
                self._pause()
        finally:
            consumer.close()


# ------------------------------------------------------------------- aiokafka


class AioKafkaMember(GroupMember):
    """aiokafka runs its own event loop in the member thread. Processing and committing hold
    a lock that the revoke callback also takes, and a batch fetched across a revoke is not
    processed: aiokafka rebalances in a background task, not inside getmany()."""

    client = "aiokafka"

    def _run(self) -> None:
        asyncio.run(self._amain())

    async def _amain(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
        from aiokafka.errors import KafkaError

        lock = asyncio.Lock()
        revokes = 0
        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                nonlocal revokes
                async with lock:
                    revokes += 1
                    member._event("revoke", (tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member._event("assign", (tp.partition for tp in assigned))

        kwargs: dict[str, Any] = {}
        if self.instance_id is not None:
            kwargs["group_instance_id"] = self.instance_id
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            fetch_max_wait_ms=100,
            **kwargs,
        )
        await consumer.start()
        try:
            consumer.subscribe([self.topic], listener=Listener())
            while not self._should_stop():
                before = revokes
                polled = await consumer.getmany(timeout_ms=200, max_records=self.batch)
                async with lock:
                    self._set_assignment(tp.partition for tp in consumer.assignment())
                    if revokes != before:
                        # A rebalance ran during getmany(): the batch may come from the old
                        # assignment. Leave it unprocessed, and re-read what is still ours.
                        owned = consumer.assignment()
                        for tp, rs in polled.items():
                            if rs and tp in owned:
                                consumer.seek(tp, rs[0].offset)
                        continue
                    records = [
                        (tp.partition, r.offset, r.value) for tp, rs in polled.items() for r in rs
                    ]
                    if not records:
                        continue
                    self._record(records)
                    offsets = _next_offsets(records)
                    try:
                        await consumer.commit(
                            {TopicPartition(self.topic, p): o for p, o in offsets.items()}
                        )
                    except KafkaError as exc:
                        self.commit_failures.append(repr(exc))
                    else:
                        self._committed_ok(offsets)
                if self.pause_s:
                    await asyncio.sleep(self.pause_s)
        finally:
            await consumer.stop()


MEMBER_CLASSES: dict[str, type[GroupMember]] = {
    "kafka-python": KafkaPythonMember,
    "confluent-kafka": ConfluentMember,
    "aiokafka": AioKafkaMember,
}


def make_member(client: str, *args: Any, **kwargs: Any) -> GroupMember:
    return MEMBER_CLASSES[client](*args, **kwargs)


def stop_all(members: Iterable[GroupMember]) -> None:
    """Stop every member (all asked first, so they close in parallel); raise the first
    failure after trying all."""
    members = list(members)
    for m in members:
        m.stop_event.set()
    first: BaseException | None = None
    for m in members:
        try:
            m.stop()
        except BaseException as exc:
            first = first or exc
    if first is not None:
        raise first


def wait_assignment(
    members: Sequence[GroupMember], partitions: int, timeout: float, what: str = ""
) -> dict[str, frozenset[int]]:
    """Wait until the members' assignments are disjoint, cover every partition, and none is
    empty (when there are at least as many partitions as members)."""

    def balanced() -> dict[str, frozenset[int]] | None:
        for m in members:
            m.check_healthy()
        got = {m.name: m.assignment for m in members}
        total = sum(len(a) for a in got.values())
        union = frozenset().union(*got.values())
        if total != partitions or union != frozenset(range(partitions)):
            return None
        if partitions >= len(members) and any(not a for a in got.values()):
            return None
        return got

    try:
        return wait_until(balanced, timeout, what or "a balanced assignment", interval=0.05)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n" + "\n".join(m.describe() for m in members)) from None


def wait_consumed(members: Sequence[GroupMember], expected: int, timeout: float) -> None:
    """Wait until the members together consumed at least `expected` records."""

    def enough() -> bool:
        for m in members:
            m.check_healthy()
        return sum(m.seen_count() for m in members) >= expected

    try:
        wait_until(enough, timeout, f"{expected} records consumed", interval=0.05)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n" + "\n".join(m.describe() for m in members)) from None


def all_seen(members: Iterable[GroupMember]) -> list[Seen]:
    out: list[Seen] = []
    for m in members:
        with m.lock:
            out.extend(m.seen)
    return out


def exactly_once_problems(
    produced: dict[tuple[int, int], bytes], seen: Sequence[Seen], limit: int = 10
) -> list[str]:
    """Why `seen` is not exactly `produced`, each record once (empty list if it is)."""
    problems: list[str] = []
    counts = Counter((s.partition, s.offset) for s in seen)
    dups = [(k, n) for k, n in counts.items() if n > 1]
    if dups:
        who: dict[tuple[int, int], list[str]] = {}
        for s in seen:
            if counts[s.partition, s.offset] > 1:
                who.setdefault((s.partition, s.offset), []).append(s.member)
        sample = sorted(dups)[:limit]
        problems.append(
            f"{len(dups)} records consumed more than once, e.g. "
            + ", ".join(f"p{p}@{o} x{n} by {who[p, o]}" for (p, o), n in sample)
        )
    missing = sorted(set(produced) - set(counts))
    if missing:
        problems.append(f"{len(missing)} records never consumed, e.g. {missing[:limit]}")
    extra = sorted(set(counts) - set(produced))
    if extra:
        problems.append(f"{len(extra)} consumed records were never produced: {extra[:limit]}")
    wrong = [
        s
        for s in seen
        if (s.partition, s.offset) in produced and produced[s.partition, s.offset] != s.value
    ]
    if wrong:
        problems.append(f"{len(wrong)} records with the wrong value, e.g. {wrong[:3]}")
    return problems


# ------------------------------------------------------------------- producing


def produce(
    bootstrap: str, topic: str, partitions: int, count: int, tag: str, timeout: float = 60.0
) -> dict[tuple[int, int], bytes]:
    """Produce `count` small records round-robin over the partitions with acks=all and
    return {(partition, offset): value} from the delivery reports."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000),
        }
    )
    out: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            out[msg.partition(), msg.offset()] = msg.value()

    deadline = time.monotonic() + timeout
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic,
                    value=f"{tag}-{i}".encode(),
                    partition=i % partitions,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    assert left == 0, f"{left} records not delivered"
    assert not errors, errors[:5]
    assert len(out) == count, f"{count} produced, {len(out)} distinct (partition, offset)"
    return out


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------- consumer protocol bytes


def _str(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def subscription_bytes(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: what a consumer puts in JoinGroup's metadata."""
    return (
        struct.pack(">hi", 0, len(topics))
        + b"".join(_str(t) for t in topics)
        + struct.pack(">i", -1)
    )


def assignment_bytes(assignment: dict[str, Sequence[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: what the leader hands each member in SyncGroup."""
    out = struct.pack(">hi", 0, len(assignment))
    for topic, parts in assignment.items():
        out += _str(topic) + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", -1)


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """Inverse of `assignment_bytes` (user data ignored)."""
    if not data:
        return {}
    pos = 2
    (n_topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(n_topics):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topic = data[pos : pos + n].decode()
        pos += n
        (n_parts,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out[topic] = list(struct.unpack_from(f">{n_parts}i", data, pos))
        pos += 4 * n_parts
    return out


# ------------------------------------------------------------------- raw group probes

NONE = 0
ILLEGAL_GENERATION = 22
REBALANCE_IN_PROGRESS = 27


def heartbeat_v3(group: str, generation: int, member_id: str, instance_id: str | None) -> Any:
    from e2e_wire import request_class

    m = request_class(12, 3)
    return m.HeartbeatRequest(
        group_id=m.GroupId(group),
        generation_id=m.i32(generation),
        member_id=member_id,
        group_instance_id=instance_id,
    )


def probe_generation(
    port: int, group: str, member_id: str, instance_id: str | None, limit: int = 100
) -> int:
    """The group's current generation, found by Heartbeats on behalf of a live member:
    Kafka answers ILLEGAL_GENERATION for every generation but the current one. Harmless for
    the member (a heartbeat with the right generation is what its client sends anyway)."""
    from e2e_wire import WireClient

    def attempt() -> int | None:
        with WireClient(port) as wire:
            for generation in range(1, limit + 1):
                code = int(
                    wire.request(
                        12, 3, heartbeat_v3(group, generation, member_id, instance_id)
                    ).error_code
                )
                if code == NONE:
                    return generation
                if code != ILLEGAL_GENERATION:
                    raise AssertionError(f"heartbeat for generation {generation}: error {code}")
        raise AssertionError(f"no generation in 1..{limit} accepted for member {member_id}")

    return int(wait_until(attempt, 20, f"the generation of group {group}", interval=0.2))
