"""Altering BROKER config resources: what Lakelog answers for the keys Kafka cannot change
at runtime (every key Kafka can change is stored: `dynamic_broker_configs`).

- SET of a key that is not one of Kafka's dynamic broker configs: refused with Kafka's
  "Cannot update these configs dynamically" (INVALID_REQUEST), the whole resource with
  it. Kafka itself accepts a name it does not know at all (a "custom" config for a
  plugin, described as sensitive); Lakelog has no plugins to read one, so it refuses
  those too, which also catches typos.
- DELETE (reset to the static value) of such a key: accepted, a no-op: there is no dynamic
  value to remove, so the key already has its static value.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.util.errors import ErrorCode

DELETE = 1


def broker_alter_problem(ops: Sequence[tuple[str, int]]) -> tuple[ErrorCode, str] | None:
    """Why altering these (name, operation) pairs of keys that cannot be changed at
    runtime is refused, or None when every one is a reset (DELETE), a no-op here."""
    changed = sorted({name for name, op in ops if op != DELETE})
    if not changed:
        return None
    return ErrorCode.invalid_request, f"Cannot update these configs dynamically: {changed}."
