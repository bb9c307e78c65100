"""Policies and operator policies, as RabbitMQ has them: which one applies to
a queue or exchange, and the arguments a queue ends up acting on.

Pure functions over plain values (the node's projections hold the policies,
node/vhosts/policies.py applies the result to live queues):

- `validate(definition, apply_to, operator)` refuses unknown keys and bad
  values with a reason (HTTP 400);
- `choose(policies, kind, name, queue_type)` picks the policy that applies:
  the pattern is searched in the name (unanchored, as RabbitMQ), apply-to
  must cover the object, and the highest priority wins (ties by name, so
  every node picks the same);
- `effective(arguments, policy, operator_policy)` merges: the queue's own
  x-arguments win over a policy, except consumer-timeout, where the smaller
  of the two wins (RabbitMQ 4.3); an operator policy caps numeric limits (the
  lower value wins) and fills what neither sets;
- `alternate_exchange(policy)`: the exchange key, `alternate-exchange`,
  which routing follows when the exchange routes a message nowhere (its
  own argument of that name overrules it; routing/table.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "APPLY_TO",
    "DEFINITION_KEYS",
    "EXCHANGE_KEYS",
    "OPERATOR_KEYS",
    "SMALLER_WINS_KEYS",
    "Effective",
    "PolicyError",
    "alternate_exchange",
    "applies",
    "choose",
    "effective",
    "validate",
    "validate_pattern",
]

APPLY_TO = ("all", "queues", "classic_queues", "quorum_queues", "streams", "exchanges")

_OVERFLOWS = ("drop-head", "reject-publish", "reject-publish-dlx")
_LOCATORS = ("client-local", "balanced")
_STRATEGIES = ("at-most-once", "at-least-once")


class PolicyError(ValueError):
    """A definition RabbitMQ would refuse; the message says why."""


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _int_at_least(minimum: int):
    def check(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= minimum

    return check


def _one_of(choices: tuple[str, ...]):
    return lambda value: value in choices


_MAX_AGE = re.compile(r"[1-9][0-9]{0,8}[YMDhms]")
# key -> (check, what a valid value is); the queue argument is "x-" + key.
DEFINITION_KEYS: dict[str, tuple[Any, str]] = {
    "dead-letter-exchange": (_string, "a string"),
    "dead-letter-routing-key": (_string, "a string"),
    "message-ttl": (_int_at_least(0), "a non-negative integer"),
    "expires": (_int_at_least(1), "a positive integer"),
    "max-length": (_int_at_least(0), "a non-negative integer"),
    "max-length-bytes": (_int_at_least(0), "a non-negative integer"),
    "overflow": (_one_of(_OVERFLOWS), "one of " + ", ".join(_OVERFLOWS)),
    "delivery-limit": (_int_at_least(-1), "an integer >= -1"),
    "queue-leader-locator": (_one_of(_LOCATORS), "one of " + ", ".join(_LOCATORS)),
    "target-group-size": (_int_at_least(1), "a positive integer"),  # quorum queues (node/vhosts/quorum_reconcile.py)
    "dead-letter-strategy": (_one_of(_STRATEGIES), "one of " + ", ".join(_STRATEGIES)),
    "alternate-exchange": (_string, "a string"),
    # ms a consumer may hold a message unsettled (classic and quorum queues; not streams, as in RabbitMQ)
    "consumer-timeout": (_int_at_least(1), "a positive integer (milliseconds)"),
    # streams (queues/stream/config.py reads them)
    "max-age": (lambda v: isinstance(v, str) and _MAX_AGE.fullmatch(v) is not None, "like 7D, 12h, 30m (Y M D h m s)"),
    "stream-max-segment-size-bytes": (_int_at_least(1), "a positive integer"),
    "stream-filter-size-bytes": (lambda v: _int_at_least(16)(v) and v <= 255, "an integer from 16 to 255"),
    "initial-cluster-size": (_int_at_least(1), "a positive integer"),  # a new stream's replicas (streams.place)
    # kept by RabbitMQ 4 so that old policies still validate; no effect there or here
    "queue-mode": (_one_of(("default", "lazy")), "one of default, lazy"),
    "queue-version": (lambda v: not isinstance(v, bool) and v in (1, 2), "1 or 2"),
    "max-in-memory-length": (_int_at_least(0), "a non-negative integer"),
    "max-in-memory-bytes": (_int_at_least(0), "a non-negative integer"),
}
# Keys for exchanges: never merged into a queue's arguments.
EXCHANGE_KEYS = ("alternate-exchange",)
# Keys where, when the queue's own argument sets it too, the smaller value wins.
SMALLER_WINS_KEYS = ("consumer-timeout",)
# What an operator policy may set: limits, where the stricter value wins.
OPERATOR_KEYS = ("message-ttl", "expires", "max-length", "max-length-bytes", "delivery-limit", "max-in-memory-length",
                 "max-in-memory-bytes", "overflow", "queue-version", "target-group-size")
# Operator keys whose value replaces the policy's instead of capping it (RabbitMQ's
# merge_policy_value); the queue's own argument still wins over both, as for any policy.
_OPERATOR_REPLACES = ("overflow", "queue-version")


def validate(definition: Any, apply_to: str = "all", operator: bool = False) -> dict[str, Any]:
    """The definition, checked; raises PolicyError naming the first problem."""
    if apply_to not in APPLY_TO:
        raise PolicyError(f"apply-to '{apply_to}' is not one of {', '.join(APPLY_TO)}")
    if not isinstance(definition, Mapping) or not definition:
        raise PolicyError("the definition must be a non-empty JSON object")
    allowed = OPERATOR_KEYS if operator else tuple(DEFINITION_KEYS)
    for key, value in definition.items():
        if key not in allowed:
            kind = "an operator policy" if operator else "a policy"
            raise PolicyError(f"'{key}' is not a key {kind} may set; valid keys: {', '.join(allowed)}")
        check, what = DEFINITION_KEYS[key]
        if not check(value):
            raise PolicyError(f"'{key}' must be {what}, got {value!r}")
    if "dead-letter-routing-key" in definition and "dead-letter-exchange" not in definition:
        raise PolicyError("dead-letter-routing-key requires dead-letter-exchange")
    if "consumer-timeout" in definition and apply_to == "streams":
        raise PolicyError("'consumer-timeout' does not apply to streams (their consumers settle nothing)")
    return dict(definition)


def validate_pattern(pattern: Any) -> str:
    if not isinstance(pattern, str):
        raise PolicyError("'pattern' must be a string (a regular expression)")
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise PolicyError(f"pattern should be regular expression but is invalid: {e}") from None
    return pattern


def applies(apply_to: str, kind: str, queue_type: str | None = None) -> bool:
    """Whether a policy with `apply_to` covers an object of `kind` ("queue" or
    "exchange") and, for a queue, of `queue_type`."""
    if kind == "exchange":
        return apply_to in ("all", "exchanges")
    if apply_to == "streams":
        return queue_type == "stream"
    return apply_to in ("all", "queues") or apply_to == f"{queue_type}_queues"


def choose(policies: Iterable[Any], kind: str, name: str, queue_type: str | None = None) -> Any:
    """The policy (any object with name, pattern, apply_to, definition,
    priority) that applies to the object, or None."""
    best = None
    for p in policies:
        if not applies(p.apply_to, kind, queue_type):
            continue
        try:
            if re.search(p.pattern, name) is None:
                continue
        except re.error:
            continue
        if best is None or (p.priority, best.name) > (best.priority, p.name):
            best = p
    return best


@dataclass(frozen=True, slots=True)
class Effective:
    policy: str | None  # the policy's name
    operator_policy: str | None
    definition: dict[str, Any]  # effective_policy_definition: the policies merged
    arguments: dict[str, Any]  # what the queue acts on: its own x-arguments and the policies'


def effective(arguments: Mapping[str, Any], policy: Any = None, operator_policy: Any = None) -> Effective:
    definition = dict(policy.definition) if policy is not None else {}
    merged = {str(k): v for k, v in arguments.items()}
    for key, value in definition.items():
        if key in SMALLER_WINS_KEYS and isinstance(merged.get("x-" + key), int):
            merged["x-" + key] = min(merged["x-" + key], value)
        elif key not in EXCHANGE_KEYS:
            merged.setdefault("x-" + key, value)  # the queue's own argument wins
    if operator_policy is not None:
        for key, value in operator_policy.definition.items():
            if key not in OPERATOR_KEYS:
                continue
            arg = "x-" + key
            if key in _OPERATOR_REPLACES:
                definition[key] = value
                if arg not in arguments:
                    merged[arg] = value
                continue
            mine = merged.get(arg)
            merged[arg] = value if not isinstance(mine, int) else _merge(key, mine, value)
            mine = definition.get(key)
            definition[key] = value if not isinstance(mine, int) else _merge(key, mine, value)
    return Effective(
        policy.name if policy is not None else None,
        operator_policy.name if operator_policy is not None else None,
        definition,
        merged,
    )


def alternate_exchange(policy: Any) -> str | None:
    """The alternate exchange `policy` (the one `choose` picked for an
    exchange, or None) sets."""
    value = policy.definition.get("alternate-exchange") if policy is not None else None
    return value if isinstance(value, str) else None


def _merge(key: str, a: int, b: int) -> int:
    """A numeric key set by both a policy (or the queue) and an operator policy: the stricter value."""
    if key == "delivery-limit" and -1 in (a, b):  # -1 is unlimited: the other is stricter
        return b if a == -1 else a
    if key == "target-group-size":  # more replicas is the safer side
        return max(a, b)
    return min(a, b)
