"""Plain-write claims: which broker may commit a plain producer's batches for a partition
and client zone.

A plain producer's batches carry no sequence, so nothing in the coordinator orders them
across brokers. Brokers share partitions out by rendezvous hashing over their own view of
the cluster, and two views can disagree for a moment (a broker killed, a PostgreSQL
restart, a paused process): the client may then send one batch to the broker that led the
partition and the next to the one that leads it now. A broker therefore claims the
partition (for that zone's clients) before it accepts such a batch, and its commit checks
the claim under the partition locks: a batch accepted under a claim another broker has
taken since is refused (NOT_PLAIN_OWNER). The new owner's claim came before it accepted
anything, so whatever it committed cannot be overtaken by what the old owner still holds.

Epochs come from one counter and are never reused, so rows may be dropped at any time
(with their topic, or past MAX_ROWS): the owner's batches are refused and it claims again.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from lakelog.coordinator.engine import Pending, Session
from lakelog.coordinator.log_types import CommitBatch, PlainOwnerKey

MAX_ROWS = 200_000
"""Claims kept; past this the oldest go (a partition count times the zones of its clients,
so only a cluster far larger than this project is sized for, or a client inventing zones,
reaches it)."""

ZONE_KEY_CHARS = 64
"""A zone is a client's word (`client.id`): its key is cut to this length so a row stays
small. Two zones that share a key only take the claim from each other more often."""

_CLAIM_KEY = (("topic_uuid", "uuid"), ("partition", "int"), ("zone", "text"))
_CHECK_KEY = (*_CLAIM_KEY, ("epoch", "bigint"))

Claim = tuple[UUID, int, str, int]
"""(topic id, partition, zone or "", epoch) a batch was accepted under."""


async def claim(
    s: Session, broker_id: int, broker_epoch: int, keys: Sequence[PlainOwnerKey]
) -> list[int | None]:
    """The epoch of this broker's claim on each key, taking over any other broker's: the
    one it holds already, else a new one. None for an unknown topic or partition, and for
    every key when the broker has been fenced (its commits would be refused anyway)."""
    if not keys:
        return []
    if broker_epoch >= 0:
        row = await s.fetchone("SELECT broker_epoch FROM brokers WHERE broker_id = ?", (broker_id,))
        if row is None or int(row[0]) != broker_epoch:
            return [None] * len(keys)
    d = s.dialect
    unique = list(dict.fromkeys((k.topic_id, k.partition, _zone(k.zone)) for k in keys))
    keyset, params = d.keyset(
        "k", _CLAIM_KEY, [(d.uuid(t), p, z) for t, p, z in unique], ordinality="i"
    )
    rows = await s.fetchall(
        "SELECT k.i, t.id, o.epoch, o.broker_id, o.broker_epoch"
        f" FROM {keyset} JOIN topics t ON t.topic_uuid = k.topic_uuid"
        " JOIN partitions p ON p.topic_id = t.id AND p.partition = k.partition"
        " LEFT JOIN plain_owners o"
        " ON o.topic_id = t.id AND o.partition = k.partition AND o.zone = k.zone",
        params,
    )
    epochs: dict[tuple[UUID, int, str], int] = {}
    taken = False
    for i, topic_row, epoch, owner, owner_epoch in rows:
        key = unique[int(i) - 1]
        if epoch is not None and int(owner) == broker_id and int(owner_epoch) == broker_epoch:
            epochs[key] = int(epoch)
            continue
        epochs[key] = await s.next_value("plain_owner_epoch")
        taken = True
        await s.execute(
            "INSERT INTO plain_owners (topic_id, partition, zone, epoch, broker_id, broker_epoch)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (topic_id, partition, zone) DO UPDATE"
            " SET epoch = excluded.epoch, broker_id = excluded.broker_id,"
            " broker_epoch = excluded.broker_epoch",
            (int(topic_row), key[1], key[2], epochs[key], broker_id, broker_epoch),
        )
    if taken:
        await _prune(s)
    return [epochs.get((k.topic_id, k.partition, _zone(k.zone))) for k in keys]


def _zone(zone: str | None) -> str:
    return (zone or "")[:ZONE_KEY_CHARS]


async def _prune(s: Session) -> None:
    row = await s.fetchone(
        "SELECT epoch FROM plain_owners ORDER BY epoch DESC LIMIT 1 OFFSET ?", (MAX_ROWS,)
    )
    if row is not None:
        await s.execute("DELETE FROM plain_owners WHERE epoch <= ?", (int(row[0]),))


async def send_check(s: Session, batches: Sequence[CommitBatch]) -> tuple[list[Claim], Pending]:
    """Send the lookup of which of the batches' claims are still current. Sent after the
    partition locks, so a claim taken after it was read cannot see its new owner commit
    first: that commit waits for the locks. Call only when some batch has a claim."""
    claims = list(
        dict.fromkeys(
            (b.topic_id, b.partition, _zone(b.owner_zone), b.owner_epoch)
            for b in batches
            if b.owner_epoch is not None
        )
    )
    d = s.dialect
    keyset, params = d.keyset(
        "k", _CHECK_KEY, [(d.uuid(t), p, z, e) for t, p, z, e in claims], ordinality="i"
    )
    pending = await s.send(
        f"SELECT k.i FROM {keyset} JOIN topics t ON t.topic_uuid = k.topic_uuid"
        " JOIN plain_owners o ON o.topic_id = t.id AND o.partition = k.partition"
        " AND o.zone = k.zone AND o.epoch = k.epoch",
        params,
    )
    return claims, pending  # type: ignore[return-value]


async def stale_indexes(
    batches: Sequence[CommitBatch], sent: tuple[list[Claim], Pending] | None
) -> set[int]:
    """Indexes of the batches whose claim another broker has taken over (or that was
    dropped)."""
    if sent is None:
        return set()
    claims, pending = sent
    current = {claims[int(row[0]) - 1] for row in await pending.fetchall()}
    return {
        i
        for i, b in enumerate(batches)
        if b.owner_epoch is not None
        and (b.topic_id, b.partition, _zone(b.owner_zone), b.owner_epoch) not in current
    }
