"""Alter plans: AlterConfigs' and IncrementalAlterConfigs' operations turned into the
configs to set and delete, validated. Pure: no request, no coordinator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakelog.log import topic_config
from lakelog.log.config_specs import LIST_CONFIGS, AlterOp
from lakelog.util.errors import ErrorCode


class ConfigProblem(Exception):
    """One resource's alteration is refused with this error code and message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
class AlterPlan:
    set_configs: dict[str, str]
    delete_configs: list[str]


def _parts(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _check_unique(names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigProblem(
                ErrorCode.invalid_request, f"Error due to duplicate config keys: {name}"
            )
        seen.add(name)


def plan_incremental(
    own: Mapping[str, str],
    fallback: Mapping[str, str],
    ops: Sequence[tuple[str, int, str | None]],
    *,
    validate: bool = True,
    list_configs: frozenset[str] = LIST_CONFIGS,
) -> AlterPlan:
    """Turn IncrementalAlterConfigs operations (name, op, value) into sets and deletes.
    APPEND/SUBTRACT start from the current value: the topic's own, else the default."""
    _check_unique(name for name, _, _ in ops)
    plan = AlterPlan({}, [])
    for name, op, value in ops:
        if op == AlterOp.SET:
            if value is None:
                raise ConfigProblem(
                    ErrorCode.invalid_request, f"Null value not supported for : {name}"
                )
            plan.set_configs[name] = value
        elif op == AlterOp.DELETE:
            plan.delete_configs.append(name)
        elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            if name not in list_configs:
                verb = "append" if op == AlterOp.APPEND else "subtract"
                raise ConfigProblem(
                    ErrorCode.invalid_config,
                    f"Config value {verb} is not allowed for config key: {name}",
                )
            current = _parts(own[name] if name in own else fallback.get(name))
            items = _parts(value)
            if op == AlterOp.APPEND:
                result = current + [i for i in items if i not in current]
            else:
                result = [i for i in current if i not in items]
            plan.set_configs[name] = ",".join(result)
        else:
            raise ConfigProblem(
                ErrorCode.invalid_request, f"Unknown config operation {op} for {name}"
            )
    problem = topic_config.validate(plan.set_configs) if validate else None
    if problem:
        raise ConfigProblem(ErrorCode.invalid_config, problem)
    return plan


def plan_replace(
    configs: Sequence[tuple[str, str | None]], *, validate: bool = True
) -> dict[str, str]:
    """Legacy AlterConfigs: the given configs become the topic's whole config."""
    _check_unique(name for name, _ in configs)
    result: dict[str, str] = {}
    for name, value in configs:
        if value is None:
            raise ConfigProblem(ErrorCode.invalid_request, f"Null value not supported for : {name}")
        result[name] = value
    problem = topic_config.validate(result) if validate else None
    if problem:
        raise ConfigProblem(ErrorCode.invalid_config, problem)
    return result
