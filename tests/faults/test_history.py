"""The history checker on synthetic histories: each invariant breaks exactly where it should
and nowhere else (a checker that reports green on a broken log would hide broker bugs)."""

from __future__ import annotations

from tests.faults.history import (
    Ack,
    ProducerHistory,
    Stored,
    check,
    decode_value,
    encode_value,
)


def producer(name: str, sends: list[tuple[int, int]], idempotent: bool = True) -> ProducerHistory:
    """A producer that sent (seq, partition) pairs; acks are added by the test."""
    return ProducerHistory(name, idempotent, sent=dict(sends))


def stored(*ids: tuple[str, int], start: int = 0) -> list[Stored]:
    return [Stored(start + i, encode_value(p, s, 20)) for i, (p, s) in enumerate(ids)]


def test_values_round_trip_at_any_size() -> None:
    assert decode_value(encode_value("i0", 42, 1024)) == ("i0", 42)
    assert len(encode_value("i0", 42, 500_000)) == 500_000
    assert decode_value(encode_value("p3", 7, 0)) == ("p3", 7)  # never shorter than its head
    assert decode_value(b"garbage") is None
    assert decode_value(None) is None
    assert decode_value(b"a:b:c") is None


def test_clean_history_is_ok() -> None:
    a = producer("a", [(0, 0), (1, 1), (2, 0), (3, 1)])
    a.acks = [Ack(0, 0, 0), Ack(1, 1, 0), Ack(2, 0, 1), Ack(3, 1, 1)]
    b = producer("b", [(0, 0), (1, 0)], idempotent=False)
    b.acks = [Ack(1, 0, 3)]
    b.failed = {0: "timed out"}
    log = {0: stored(("a", 0), ("a", 2), ("b", 0), ("b", 1)), 1: stored(("a", 1), ("a", 3))}
    v = check([a, b], log, {0: 4, 1: 2})
    assert v.ok, v.summary()
    assert (v.sent, v.acked, v.failed, v.stored) == (6, 5, 1, 6)
    assert v.stored_unacked == 1  # b's seq 0: failed to the client, stored by the broker
    assert v.foreign == 0


def test_lost_acknowledged_record() -> None:
    a = producer("a", [(0, 0), (1, 0), (2, 0)])
    a.acks = [Ack(0, 0, 0), Ack(1, 0, 1), Ack(2, 0, 2)]
    # seq 1 never made it; seq 2 sits where seq 1 was acknowledged; offset 2 is empty.
    v = check([a], {0: stored(("a", 0), ("a", 2))}, {0: 2})
    assert v.lost == 2
    assert v.duplicated == v.out_of_order == v.gaps == 0
    assert any("seq 1 acked at p0@1" in t for t in v.examples["lost"]), v.summary()
    assert not v.ok


def test_acked_beyond_high_watermark_is_lost() -> None:
    a = producer("a", [(0, 0)])
    a.acks = [Ack(0, 0, 5)]
    v = check([a], {0: []}, {0: 0})
    assert v.lost == 1 and v.gaps == 0


def test_duplicates_count_extra_copies() -> None:
    a = producer("a", [(0, 0), (1, 0)])
    a.acks = [Ack(0, 0, 0), Ack(1, 0, 1)]
    log = {0: stored(("a", 0), ("a", 1), ("a", 1), ("a", 1))}
    v = check([a], log, {0: 4})
    assert v.duplicated == 2
    assert v.lost == v.out_of_order == v.gaps == 0
    assert "a seq 1 stored 3 times: p0@1, p0@2, p0@3" in v.examples["duplicated"]
    assert v.places == [(0, 1), (0, 2), (0, 3)]


def test_duplicate_across_partitions_is_foreign_not_silent() -> None:
    """A record stored in a partition it was never sent to is reported, not absorbed."""
    a = producer("a", [(0, 0)])
    a.acks = [Ack(0, 0, 0)]
    v = check([a], {0: stored(("a", 0)), 1: stored(("a", 0))}, {0: 1, 1: 1})
    assert v.foreign == 1 and v.duplicated == 0


def test_out_of_order_per_producer_and_partition() -> None:
    a = producer("a", [(i, 0) for i in range(5)], idempotent=False)
    b = producer("b", [(i, 0) for i in range(2)])
    # a: 0 3 1 2 4 -> 1 and 2 are stored after 3 (two records out of place);
    # b interleaves with a, which is fine: order is per producer.
    log = {0: stored(("a", 0), ("b", 0), ("a", 3), ("a", 1), ("b", 1), ("a", 2), ("a", 4))}
    v = check([a, b], log, {0: 7})
    assert v.out_of_order == 2, v.summary()
    a.acks = [Ack(3, 0, 2)]
    v = check([a, b], log, {0: 7})
    assert v.examples["out of order"][0] == (
        "a p0: seq 1 at offset 3 after seq 3 at offset 2 (seq 1 unacked; seq 3 acked at 2)"
    )
    assert v.places[:2] == [(0, 2), (0, 3)]
    assert v.lost == v.duplicated == v.gaps == 0


def test_order_is_per_partition() -> None:
    a = producer("a", [(0, 1), (1, 0), (2, 1), (3, 0)])
    log = {0: stored(("a", 1), ("a", 3)), 1: stored(("a", 0), ("a", 2))}
    assert check([a], log, {0: 2, 1: 2}).ok


def test_retried_duplicate_does_not_count_as_reordering() -> None:
    a = producer("a", [(0, 0), (1, 0), (2, 0)])
    log = {0: stored(("a", 0), ("a", 1), ("a", 0), ("a", 2))}
    v = check([a], log, {0: 4})
    assert v.duplicated == 1 and v.out_of_order == 0


def test_gaps_in_offsets() -> None:
    a = producer("a", [(0, 0), (1, 0)])
    log = {0: [Stored(0, encode_value("a", 0, 10)), Stored(3, encode_value("a", 1, 10))]}
    v = check([a], log, {0: 5})
    assert v.gaps == 3  # 1, 2 and 4
    assert v.examples["gaps"] == ["p0: 3 offsets missing, first [1, 2, 4]"]


def test_log_start_bounds_gaps_and_rereads_are_harmless() -> None:
    a = producer("a", [(0, 0), (1, 0)])
    recs = [Stored(10, encode_value("a", 0, 10)), Stored(11, encode_value("a", 1, 10))]
    v = check([a], {0: recs + recs[1:]}, {0: 12}, log_start={0: 10})
    assert v.ok and v.stored == 2, v.summary()


def test_fatal_errors_and_foreign_records() -> None:
    a = producer("a", [(0, 0)])
    a.fatal = ["OUT_OF_ORDER_SEQUENCE_NUMBER: sequence desynchronization"]
    log = {0: [Stored(0, b"something else"), Stored(1, encode_value("zz", 1, 10))]}
    v = check([a], log, {0: 2})
    assert v.fatal == 1 and v.foreign == 2
    assert not v.ok
    assert "desynchronization" in v.summary()


def test_examples_are_bounded() -> None:
    a = producer("a", [(i, 0) for i in range(100)])
    a.acks = [Ack(i, 0, i) for i in range(100)]
    v = check([a], {0: []}, {0: 100})
    assert v.lost == 100 and v.gaps == 100
    assert len(v.examples["lost"]) == 10


def test_plain_producers_findings_are_counted_apart() -> None:
    """Duplicates and reorderings are attributed to the kind of producer that saw them."""
    plain = ProducerHistory("plain", idempotent=False, sent={0: 0, 1: 0})
    safe = ProducerHistory("safe", idempotent=True, sent={0: 0, 1: 0})
    log = {
        0: [
            Stored(0, encode_value("plain", 1, 10)),
            Stored(1, encode_value("plain", 0, 10)),
            Stored(2, encode_value("plain", 0, 10)),
            Stored(3, encode_value("safe", 0, 10)),
            Stored(4, encode_value("safe", 1, 10)),
            Stored(5, encode_value("safe", 1, 10)),
        ]
    }
    v = check([plain, safe], log, {0: 6})
    assert (v.duplicated, v.duplicated_plain) == (2, 1), v.summary()
    assert (v.out_of_order, v.out_of_order_plain) == (1, 1), v.summary()
