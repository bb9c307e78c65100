"""Definitions: the whole topology as one JSON document, in RabbitMQ's shape.

`document()` exports what the metadata holds (GET /api/definitions, or one
vhost's part with `document(vhost)`); `apply(doc)` declares everything in a
document through the metadata store (POST /api/definitions, and `load(path)`
for the `definitions_file` setting, like RabbitMQ's load_definitions), each
declaration idempotent, so loading the same file on every start or on every
node changes nothing the second time. `check(doc)` refuses a malformed
document before anything of it is applied.

Users exported by RabbitMQ keep their password hash
(rabbit_password_hashing_sha256 or _sha512, routing/rabbit_passwords.py)
until they first log in; users without a hash but with a "password" get one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from metadata import commands as mc
from metadata.feature_flags import OPERATOR_POLICIES, TOPIC_PERMISSIONS
from node.vhosts.metadata_store import new_key
from routing import policies, rabbit_passwords
from routing.users import hash_password

if TYPE_CHECKING:
    from metadata.projections import Projections
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.vhost import VHost
    from routing.users import Authenticator

FORMAT_VERSION = 1
HASHING_ALGORITHM = "warren_pbkdf2_sha256"  # routing/users.py's format


class DefinitionsError(ValueError):
    """A document that cannot be imported; the message says where and why."""


class DefinitionsNode(Protocol):
    """What the definitions use of their node; `metadata` is read when a document is loaded."""

    auth: Authenticator
    vhosts: dict[str, VHost]
    projections: Projections
    metadata: MetadataStore


class DefinitionsFile:
    def __init__(self, node: DefinitionsNode):
        self.node = node

    def document(self, vhost: str | None = None) -> dict:
        """Everything durable, as GET /api/definitions exports it; with
        `vhost`, that vhost's policies and topology, without vhost fields
        (GET /api/definitions/{vhost})."""
        auth = self.node.auth
        vhosts = [self.node.vhosts[vhost]] if vhost is not None else list(self.node.vhosts.values())
        doc: dict = {"version": FORMAT_VERSION}
        if vhost is None:
            doc["vhosts"] = [_vhost(v) for v in vhosts]
            doc["users"] = [_user(u) for u in auth.users.values()]
            doc["permissions"] = [{"user": user, "vhost": vh, "configure": p.configure, "write": p.write,
                                   "read": p.read} for (user, vh), p in auth.permissions.items()]  # fmt: skip
            doc["topic_permissions"] = [{"user": u, "vhost": vh, "exchange": x, "write": w, "read": r} for (u, vh, x), (w, r)
                                        in self.node.projections.topic_permissions.items()]  # fmt: skip
            doc["operator_policies"] = self._policies(vhosts, True)
        doc.update(policies=self._policies(vhosts, False), queues=[], exchanges=[], bindings=[])
        for v in vhosts:
            for q in v.queues.values():
                if q.durable and q.exclusive_owner is None:
                    doc["queues"].append({"vhost": v.name, "name": q.name, "durable": True,
                                          "auto_delete": q.auto_delete, "arguments": _plain(q.arguments)})  # fmt: skip
            for x in v.routing.exchanges():
                if x.durable and x.name and not x.name.startswith("amq."):
                    doc["exchanges"].append({"vhost": v.name, "name": x.name, "type": str(x.type),
                                             "durable": True, "auto_delete": x.auto_delete, "internal": x.internal,
                                             "arguments": _plain(x.arguments)})  # fmt: skip
            for b in v.routing.list_bindings():
                doc["bindings"].append({"vhost": v.name, "source": b.source,
                                        "destination_type": str(b.destination_kind), "destination": b.destination,
                                        "routing_key": b.binding_key, "arguments": _plain(b.arguments)})  # fmt: skip
        if vhost is not None:
            for key in ("policies", "queues", "exchanges", "bindings"):
                for item in doc[key]:
                    del item["vhost"]
        return doc

    def _policies(self, vhosts: list[Any], operator: bool) -> list[dict]:
        projections = self.node.projections
        return [{"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
                 "definition": _plain(p.definition), "priority": p.priority}
                for v in vhosts for p in projections.vhost_policies(v.name, operator)]  # fmt: skip

    async def load(self, path: str) -> None:
        with open(path) as f:
            doc = json.load(f)
        await self.apply(doc)

    async def apply(self, doc: Any, vhost: str | None = None) -> None:
        """Declares everything in `doc`, in dependency order; with `vhost`,
        only policies and topology, all into that vhost (POST
        /api/definitions/{vhost}). Raises DefinitionsError before changing
        anything when the document is malformed."""
        check(doc, vhost is not None)
        flags = self.node.projections.feature_flags
        for key, flag in (("operator_policies", OPERATOR_POLICIES), ("topic_permissions", TOPIC_PERMISSIONS)):
            if vhost is None and doc.get(key) and flag not in flags:
                raise DefinitionsError(f"'{key}' need the feature flag {flag} (warren ctl enable_feature_flag {flag})")
        run = self.node.metadata.run

        def where(item: dict) -> str:
            return vhost if vhost is not None else item.get("vhost", "/")

        if vhost is None:
            for v in doc.get("vhosts", []):
                await run(mc.AddVHost(new_key(), v["name"], v.get("description", ""), tuple(_tags(v.get("tags")))))
            for u in doc.get("users", []):
                await run(mc.PutUser(new_key(), u["name"], _password_hash(u), tuple(_tags(u.get("tags")))))
            for p in doc.get("permissions", []):
                await run(mc.SetPermissions(new_key(), p["user"], p["vhost"], p["configure"], p["write"], p["read"]))
            for t in doc.get("topic_permissions", []):
                await run(mc.SetTopicPermissions(new_key(), t["user"], t["vhost"], t["exchange"], t.get("write", ".*"),
                                                 t.get("read", ".*")))  # fmt: skip
        for x in doc.get("exchanges", []):
            v = self._vhost(where(x))
            await v.declare_exchange(x["name"], x.get("type", "direct"), x.get("durable", True),
                                     x.get("auto_delete", False), x.get("internal", False),
                                     x.get("arguments") or {})  # fmt: skip
        for q in doc.get("queues", []):
            v = self._vhost(where(q))
            await v.declare_queue(q["name"], q.get("durable", True), None, q.get("auto_delete", False),
                                  q.get("arguments") or {})  # fmt: skip
        for b in doc.get("bindings", []):
            v = self._vhost(where(b))
            await v.bind(b["source"], b.get("destination_type", "queue"), b["destination"],
                         b.get("routing_key", ""), b.get("arguments") or {})  # fmt: skip
        keys = [("policies", mc.SetPolicy)] + ([("operator_policies", mc.SetOperatorPolicy)] if vhost is None else [])
        for key, command in keys:
            for p in doc.get(key, []):
                await run(command(new_key(), where(p), p["name"], p["pattern"], p.get("apply-to", "all"),
                                  p["definition"], int(p.get("priority", 0))))  # fmt: skip

    def _vhost(self, name: str) -> Any:
        v = self.node.vhosts.get(name)
        if v is None:
            raise DefinitionsError(f"no vhost '{name}'")
        return v


def check(doc: Any, vhost_only: bool = False) -> None:
    """Raises DefinitionsError naming the first entry that cannot be
    imported: a wrong shape, a policy RabbitMQ would refuse, a password hash
    in a format Warren cannot verify."""
    if not isinstance(doc, dict):
        raise DefinitionsError("a definitions document is a JSON object")
    required = {"vhosts": ("name",), "users": ("name",), "permissions": ("user", "vhost", "configure", "write", "read"),
                "topic_permissions": ("user", "vhost", "exchange"),
                "exchanges": ("name",), "queues": ("name",), "bindings": ("source", "destination"),
                "policies": ("name", "pattern", "definition"),
                "operator_policies": ("name", "pattern", "definition")}  # fmt: skip
    for key, fields in required.items():
        items = doc.get(key, [])
        if not isinstance(items, list):
            raise DefinitionsError(f"'{key}' must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise DefinitionsError(f"{key}[{i}] must be an object")
            missing = [f for f in fields if f not in item]
            if missing:
                raise DefinitionsError(f"{key}[{i}] lacks {', '.join(missing)}")
    for key, operator in (("policies", False), ("operator_policies", True)):
        for p in doc.get(key, []):
            try:
                policies.validate_pattern(p["pattern"])
                policies.validate(p["definition"], p.get("apply-to", "all"), operator)
            except policies.PolicyError as e:
                raise DefinitionsError(f"{key} '{p['name']}': {e}") from None
    if not vhost_only:
        for u in doc.get("users", []):
            _password_hash(u)


def _password_hash(user: dict) -> str:
    """The hash to store for a user entry (Warren's, or RabbitMQ's kept as it is)."""
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
    return hash_password(password) if isinstance(password, str) and password else ""


def _user(user: Any) -> dict:
    exported = rabbit_passwords.export(user.password_hash)
    algorithm, password_hash = exported if exported is not None else (HASHING_ALGORITHM, user.password_hash)
    return {"name": user.name, "password_hash": password_hash, "hashing_algorithm": algorithm, "tags": user.tags}


def _tags(tags: Any) -> list[str]:
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    return [str(t) for t in tags or []]


def _vhost(vhost: Any) -> dict:
    return {"name": vhost.name, "description": vhost.description, "tags": list(vhost.tags)}


def _plain(arguments: Any) -> dict:
    return {str(k): v for k, v in dict(arguments).items()}
