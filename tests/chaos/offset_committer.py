"""A consumer that commits every record asynchronously, as stream frameworks do, and logs
what it sent and what the broker acknowledged, for `test_offset_commit_kills`.

Run as a child process (it is SIGKILLed mid-stream): `python offset_committer.py BOOTSTRAP
TOPIC PARTITIONS GROUP LOG`. Assigned every partition (no rebalance), it starts at the
group's committed offsets. Each line is written with one `os.write` on an O_APPEND file,
so a kill loses no line that was written: `S p o` before a commit of offset o for
partition p is handed to the client, `A p o` when the broker acknowledged it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def main() -> None:
    bootstrap, topic, partitions, group, log_path = sys.argv[1:6]
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def acknowledged(err: Any, offsets: list[TopicPartition]) -> None:
        if err is not None:
            return
        for tp in offsets:
            if tp.error is None and tp.offset >= 0:
                os.write(fd, f"A {tp.partition} {tp.offset}\n".encode())

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "on_commit": acknowledged,
            "reconnect.backoff.max.ms": 200,
        }
    )
    consumer.assign([TopicPartition(topic, p) for p in range(int(partitions))])
    os.write(fd, b"R\n")  # running: the parent kills only after this
    while True:
        message = consumer.poll(0.05)
        if message is None or message.error() is not None:
            continue
        offset = message.offset() + 1
        os.write(fd, f"S {message.partition()} {offset}\n".encode())
        try:
            consumer.commit(
                offsets=[TopicPartition(topic, message.partition(), offset)], asynchronous=True
            )
        except Exception:  # a full client queue; the next record's commit covers it
            os.write(fd, f"F {message.partition()} {offset}\n".encode())


if __name__ == "__main__":
    main()
