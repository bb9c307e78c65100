"""What a definitions document may hold, checked before anything of it is
applied (node/vhosts/definitions.py): a malformed document, or one holding
something Warren would have to drop, is refused whole with a DefinitionsError
naming the entry, so an import never stops half-way on a bad entry and
nothing is accepted and then ignored.

RabbitMQ's export (rabbit_definitions) is the shape: top-level version keys,
users (with `limits`), vhosts (with `metadata` and `limits`), permissions,
topic_permissions, `parameters` (vhost-limits, operator_policy and shovel
are the components Warren implements), `global_parameters`, policies, queues,
exchanges, bindings.
"""

from __future__ import annotations

from typing import Any

from metadata.commands import GLOBAL_PARAMETER_NAMES
from metadata.feature_flags import (
    GLOBAL_PARAMETERS,
    OPERATOR_POLICIES,
    SHOVELS,
    TOPIC_PERMISSIONS,
    VHOST_DEFAULT_QUEUE_TYPE,
    VHOST_DELETION_PROTECTION,
    VHOST_MAX_QUEUES,
)
from metadata.machine import LIMITS
from metadata.topology import QUEUE_TYPES
from node.shovel import definition as shovel_definition
from routing import policies, rabbit_passwords
from routing.users import hash_password

HASHING_ALGORITHM = "warren_pbkdf2_sha256"  # routing/users.py's format
VHOST_LIMITS, OPERATOR_POLICY, SHOVEL = "vhost-limits", "operator_policy", "shovel"  # the components Warren has

# Keys that describe the document and ask for nothing: the exporting product
# and version, and what RabbitMQ 4 adds to say where it came from (a vhost's
# own export also names that vhost's limits and metadata, which its
# `parameters` carry for the import). "version" is Warren 0.2's format number.
INFORMATIONAL = ("rabbit_version", "rabbitmq_version", "product_name", "product_version", "rabbitmq_definition_format",
                 "original_cluster_name", "original_vhost_name", "explanation", "version")  # fmt: skip
VHOST_INFORMATIONAL = ("metadata", "description", "limits")
# key -> fields each entry must have
ENTRIES = {"vhosts": ("name",), "users": ("name",), "permissions": ("user", "vhost", "configure", "write", "read"),
           "topic_permissions": ("user", "vhost", "exchange"), "parameters": ("component", "name", "value"),
           "global_parameters": ("name", "value"), "policies": ("name", "pattern", "definition"),
           "operator_policies": ("name", "pattern", "definition"),  # Warren 0.2's export; now in parameters
           "queues": ("name",), "exchanges": ("name",), "bindings": ("source", "destination")}  # fmt: skip
VHOST_ENTRIES = ("parameters", "policies", "queues", "exchanges", "bindings")  # what a vhost's import applies


class DefinitionsError(ValueError):
    """A document that cannot be imported; the message says where and why."""


def check(doc: Any, flags: set[str] | frozenset[str], vhost_only: bool = False) -> None:
    """Raises DefinitionsError naming the first thing that cannot be imported:
    an unknown key, a wrong shape, a parameter component or global parameter
    Warren does not implement, a policy RabbitMQ would refuse, a password hash
    Warren cannot verify, or something whose feature flag (`flags`: the
    enabled ones) is off."""
    if not isinstance(doc, dict):
        raise DefinitionsError("a definitions document is a JSON object")
    allowed = (*INFORMATIONAL, *(VHOST_INFORMATIONAL + VHOST_ENTRIES if vhost_only else ENTRIES))
    unknown = sorted(k for k in doc if k not in allowed)
    if unknown:
        raise DefinitionsError(f"unknown key(s) {', '.join(repr(k) for k in unknown)} in a "
                               f"{'vhost ' if vhost_only else ''}definitions document")  # fmt: skip
    for key, fields in ENTRIES.items():
        items = doc.get(key, [])
        if not isinstance(items, list):
            raise DefinitionsError(f"'{key}' must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise DefinitionsError(f"{key}[{i}] must be an object")
            missing = [f for f in fields if f not in item]
            if missing:
                raise DefinitionsError(f"{key}[{i}] lacks {', '.join(missing)}")
    for p in doc.get("parameters", []):
        _check_parameter(p)
    operator = [p for p in doc.get("parameters", []) if p["component"] == OPERATOR_POLICY]
    for key, items, operator_policy in (("policies", doc.get("policies", []), False),
                                        ("operator_policies", doc.get("operator_policies", []), True),
                                        ("parameters", [{**p["value"], "name": p["name"]} for p in operator], True)):  # fmt: skip
        for p in items:
            try:
                policies.validate_pattern(p["pattern"])
                policies.validate(p["definition"], p.get("apply-to", "all"), operator_policy)
            except policies.PolicyError as e:
                raise DefinitionsError(f"{key}: {'operator policy' if operator_policy else 'policy'} "
                                       f"'{p['name']}': {e}") from None  # fmt: skip
    for g in doc.get("global_parameters", []):
        if g["name"] not in GLOBAL_PARAMETER_NAMES:
            raise DefinitionsError(f"global parameter '{g['name']}' is not one Warren keeps "
                                   f"({', '.join(GLOBAL_PARAMETER_NAMES)})")  # fmt: skip
        if not isinstance(g["value"], str):
            raise DefinitionsError(f"global parameter '{g['name']}': the value must be a string")
    for v in doc.get("vhosts", []):
        if v.get("tracing"):
            raise DefinitionsError(f"vhost '{v['name']}': tracing is not implemented by Warren")
        check_default_queue_type(default_queue_type(v), f"vhost '{v['name']}': ")
        deletion_protection(v)
        limits_of(v.get("limits"), "vhost", f"vhost '{v['name']}'")
    for u in doc.get("users", []):
        password_hash(u)
        limits_of(u.get("limits"), "user", f"user '{u['name']}'")
    _check_flags(doc, flags)


def _check_parameter(p: dict) -> None:
    where = f"parameter '{p['name']}' (component '{p['component']}', vhost '{p.get('vhost', '')}')"
    if p["component"] == VHOST_LIMITS:
        limits_of(p["value"], "vhost", where)
    elif p["component"] == OPERATOR_POLICY:
        value = p["value"]
        if not isinstance(value, dict) or "pattern" not in value or "definition" not in value:
            raise DefinitionsError(f"{where}: the value must be an object with pattern and definition")
    elif p["component"] == SHOVEL:
        try:
            shovel_definition.parse(p["value"])
        except shovel_definition.DefinitionError as e:
            raise DefinitionsError(f"{where}: {e}") from None
    else:
        raise DefinitionsError(f"{where}: Warren does not implement the '{p['component']}' component "
                               f"(only {VHOST_LIMITS}, {OPERATOR_POLICY} and {SHOVEL})")  # fmt: skip


def _check_flags(doc: dict, flags: set[str] | frozenset[str]) -> None:
    parameters = doc.get("parameters", [])
    needs = {
        OPERATOR_POLICIES: bool(doc.get("operator_policies")) or any(p["component"] == OPERATOR_POLICY
                                                                      for p in parameters),  # fmt: skip
        TOPIC_PERMISSIONS: bool(doc.get("topic_permissions")),
        GLOBAL_PARAMETERS: bool(doc.get("global_parameters")),
        SHOVELS: any(p["component"] == SHOVEL for p in parameters),
        VHOST_DEFAULT_QUEUE_TYPE: any(default_queue_type(v) is not None for v in doc.get("vhosts", [])),
        VHOST_DELETION_PROTECTION: any(deletion_protection(v) for v in doc.get("vhosts", [])),
        VHOST_MAX_QUEUES: any("max-queues" in (limits_of(p["value"], "vhost", "") or {})
                              for p in parameters if p["component"] == VHOST_LIMITS)
        or any("max-queues" in (limits_of(v.get("limits"), "vhost", "") or {}) for v in doc.get("vhosts", [])),
    }  # fmt: skip
    for flag, needed in needs.items():
        if needed and flag not in flags:
            raise DefinitionsError(f"the document needs the feature flag {flag} (warren ctl enable_feature_flag {flag})")


def check_default_queue_type(queue_type: Any, where: str = "") -> None:
    """A vhost's default_queue_type as a request gives it: None (not given),
    or one of the queue types."""
    if queue_type is not None and queue_type not in QUEUE_TYPES:
        raise DefinitionsError(f"{where}default_queue_type {queue_type!r} is not a valid queue type "
                               f"({', '.join(QUEUE_TYPES)})")  # fmt: skip


def default_queue_type(vhost: dict) -> Any:
    """A vhost entry's default queue type: in its metadata (RabbitMQ 4), else
    beside it (as GET /api/vhosts shows it); None when it names none."""
    metadata = vhost.get("metadata")
    if isinstance(metadata, dict) and "default_queue_type" in metadata:
        return metadata["default_queue_type"]
    return vhost.get("default_queue_type")


def deletion_protection(vhost: dict) -> bool | None:
    """A vhost entry's metadata `protected_from_deletion` (RabbitMQ 4.1 exports
    it there): True, False, or None when the entry does not say."""
    metadata = vhost.get("metadata")
    if not isinstance(metadata, dict) or "protected_from_deletion" not in metadata:
        return None
    value = metadata["protected_from_deletion"]
    if not isinstance(value, bool):
        raise DefinitionsError(f"vhost '{vhost['name']}': protected_from_deletion must be true or false")
    return value


def limits_of(value: Any, scope: str, where: str) -> dict[str, int] | None:
    """A `limits` map ({"max-connections": 10}) as `scope` takes it; None when
    absent. RabbitMQ 3.x writes an empty one as []."""
    if value is None or value == []:
        return None if value is None else {}
    if not isinstance(value, dict):
        raise DefinitionsError(f"{where}: limits must be an object")
    for name, n in value.items():
        if name not in LIMITS[scope]:
            raise DefinitionsError(f"{where}: Warren does not implement the {scope} limit '{name}' "
                                   f"(only {', '.join(LIMITS[scope])})")  # fmt: skip
        if type(n) is not int:
            raise DefinitionsError(f"{where}: limit '{name}' must be an integer, got {n!r}")
    return value


def password_hash(user: dict, hashing: str = HASHING_ALGORITHM) -> str:
    """The hash to store for a user entry (Warren's, or RabbitMQ's kept as it
    is; a plain "password" is hashed as `hashing` says)."""
    stored = user.get("password_hash", "")
    # without a hashing_algorithm RabbitMQ assumes its default, salted SHA-256
    default = HASHING_ALGORITHM if str(stored).startswith("pbkdf2-sha256$") else "rabbit_password_hashing_sha256"
    algorithm = user.get("hashing_algorithm") or default
    if not isinstance(stored, str):
        raise DefinitionsError(f"user '{user['name']}': password_hash must be a string")
    if stored and algorithm == HASHING_ALGORITHM:
        if not stored.startswith("pbkdf2-sha256$"):
            raise DefinitionsError(f"user '{user['name']}': password_hash is not in {HASHING_ALGORITHM} format")
        return stored
    if stored:
        try:
            return rabbit_passwords.stored_form(algorithm, stored)
        except ValueError as e:
            raise DefinitionsError(f"user '{user['name']}': {e}") from None
    password = user.get("password")
    return hash_password(password, algorithm=hashing) if isinstance(password, str) and password else ""
