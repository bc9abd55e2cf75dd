"""TxnOffsetCommit v3+ (KIP-447): is the committing consumer still a member of its group's
generation? Looser than OffsetCommit's check, as in Kafka: only fields the client sent are
enforced, and a rebalance in progress does not refuse the commit (it is staged until the
transaction ends)."""

from __future__ import annotations

from lakelog.groups.group import Group
from lakelog.util.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""


def check_txn_commit(
    group: Group | None, generation: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """`group` None: the group has no live state (it behaves as an empty group of
    generation 0, which Kafka creates on the fly)."""
    members = group.members if group is not None else {}
    static = group.static if group is not None else {}
    current_generation = group.generation if group is not None else 0
    if instance_id is not None and instance_id in static and static[instance_id] != member_id:
        return ErrorCode.fenced_instance_id
    if member_id != UNKNOWN_MEMBER_ID and member_id not in members:
        return ErrorCode.unknown_member_id
    if generation >= 0 and generation != current_generation:
        return ErrorCode.illegal_generation
    return ErrorCode.none
