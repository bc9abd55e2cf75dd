"""confluent-kafka consumers speaking the KIP-848 protocol (`group.protocol=consumer`) for
the consumer group tests, built on `group_clients.GroupMember` (same bookkeeping: what it
consumed, its rebalance callbacks, synchronous commits after each batch)."""

from __future__ import annotations

from typing import Any

from group_clients import GroupMember, _next_offsets


class Kip848Member(GroupMember):
    """`topic` may be a regex (librdkafka: a leading `^`); records are then kept per
    topic in `by_topic`."""

    client = "confluent-kafka (group.protocol=consumer)"

    def __init__(self, *args: Any, remote_assignor: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.remote_assignor = remote_assignor
        self.by_topic: dict[str, list[tuple[int, int, bytes]]] = {}

    def conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "group.protocol": "consumer",
            "client.id": self.name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        if self.remote_assignor:
            conf["group.remote.assignor"] = self.remote_assignor
        if self.instance_id is not None:
            conf["group.instance.id"] = self.instance_id
        return conf

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(self.conf())
        try:
            consumer.subscribe([self.topic], **self.librdkafka_callbacks())
            while not self._should_stop():
                msgs = consumer.consume(num_messages=self.batch, timeout=0.2)
                self._set_assignment(tp.partition for tp in consumer.assignment())
                records = []
                topics: dict[tuple[int, int], str] = {}
                for m in msgs:
                    if m.error():
                        self.errors.append(str(m.error()))
                        continue
                    records.append((m.partition(), m.offset(), m.value()))
                    topics[m.partition(), m.offset()] = m.topic()
                if not records:
                    continue
                self._record(records)
                with self.lock:
                    for p, o, v in records:
                        self.by_topic.setdefault(topics[p, o], []).append((p, o, v))
                next_offsets = {(topics[p, o], p): o + 1 for p, o, _ in records}
                commit = [TopicPartition(t, p, o) for (t, p), o in next_offsets.items()]
                try:
                    result = consumer.commit(offsets=commit, asynchronous=False)
                except KafkaException as exc:
                    self.commit_failures.append(repr(exc))
                    continue
                failed = [f"{tp.partition}: {tp.error}" for tp in result or () if tp.error]
                if failed:
                    self.commit_failures.append(f"partition errors {failed}")
                else:
                    self._committed_ok(_next_offsets(records))
                self._pause()
        finally:
            consumer.close()
