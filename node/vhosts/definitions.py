"""Definitions: the whole topology as one JSON document, in RabbitMQ 4.2's shape.

`document()` exports what the metadata holds (GET /api/definitions, or one
vhost's part with `document(vhost)`); `apply(doc)` declares everything in a
document through the metadata store (POST /api/definitions, and `load(path)`
for the `definitions_file` setting, like RabbitMQ's load_definitions), each
declaration idempotent, so loading the same file on every start or on every
node changes nothing the second time. node/vhosts/definitions_check.py
refuses a document before anything of it is applied.

Round trips with RabbitMQ: users keep RabbitMQ's password hash
(rabbit_password_hashing_sha256 or _sha512, routing/rabbit_passwords.py)
until their password changes, and export it as RabbitMQ wrote it; vhost
limits, operator policies and shovels travel as `parameters` (components
vhost-limits, operator_policy and shovel), as RabbitMQ keeps them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from metadata import commands as mc
from node import __version__
from node.shovel import definition as shovel_definition
from node.vhosts.definitions_check import (
    HASHING_ALGORITHM,
    OPERATOR_POLICY,
    SHOVEL,
    VHOST_LIMITS,
    DefinitionsError,
    check,
    check_default_queue_type,
    default_queue_type,
    deletion_protection,
    limits_of,
    password_hash,
)
from node.vhosts.delayed_messages import INTERNAL_PREFIXES  # a delayed exchange brings its own queue
from node.vhosts.metadata_store import new_key
from routing import rabbit_passwords

if TYPE_CHECKING:
    from metadata.projections import Projections
    from node.config import Config
    from node.vhosts.metadata_store import MetadataStore
    from node.vhosts.vhost import VHost
    from routing.users import Authenticator

__all__ = ["HASHING_ALGORITHM", "DefinitionsError", "DefinitionsFile", "check_default_queue_type", "vhost_command"]


class DefinitionsNode(Protocol):
    """What the definitions use of their node; `metadata` is read when a document is loaded."""

    config: Config  # product_version, the export's rabbit_version
    auth: Authenticator
    vhosts: dict[str, VHost]
    projections: Projections
    metadata: MetadataStore


class DefinitionsFile:
    def __init__(self, node: DefinitionsNode):
        self.node = node

    def document(self, vhost: str | None = None) -> dict:
        """Everything durable, as GET /api/definitions exports it; with
        `vhost`, that vhost's parameters, policies and topology, without
        their vhost fields (GET /api/definitions/{vhost})."""
        node = self.node
        projections = node.projections
        vhosts = [node.vhosts[vhost]] if vhost is not None else list(node.vhosts.values())
        version = node.config.product_version
        doc: dict = {"rabbit_version": version, "rabbitmq_version": version, "product_name": "Warren",
                     "product_version": __version__}  # fmt: skip
        if vhost is None:
            doc["users"] = [self._user(u) for u in node.auth.users.values()]
            doc["vhosts"] = [self._vhost(v) for v in vhosts]
            doc["permissions"] = [{"user": user, "vhost": vh, "configure": p.configure, "write": p.write,
                                   "read": p.read} for (user, vh), p in node.auth.permissions.items()]  # fmt: skip
            doc["topic_permissions"] = [{"user": u, "vhost": vh, "exchange": x, "write": w, "read": r}
                                        for (u, vh, x), (w, r) in projections.topic_permissions.items()]  # fmt: skip
        doc["parameters"] = [{"vhost": v.name, "component": VHOST_LIMITS, "name": "limits", "value": limits}
                             for v in vhosts if (limits := self._limits("vhost", v.name))]  # fmt: skip
        doc["parameters"] += [{"vhost": p["vhost"], "component": OPERATOR_POLICY, "name": p.pop("name"),
                               "value": {k: p[k] for k in ("pattern", "definition", "priority", "apply-to")}}
                              for p in self._policies(vhosts, True)]  # fmt: skip
        names = {v.name for v in vhosts}
        doc["parameters"] += [{"vhost": vh, "component": component, "name": name, "value": json.loads(value)}
                              for (vh, component, name), value in sorted(projections.parameters.items())
                              if vh in names]  # fmt: skip
        if vhost is None:
            doc["global_parameters"] = [{"name": n, "value": v} for n, v in sorted(projections.global_parameters.items())]
        doc.update(policies=self._policies(vhosts, False), queues=[], exchanges=[], bindings=[])
        for v in vhosts:
            for q in v.queues.values():
                if q.durable and q.exclusive_owner is None and not q.name.startswith(INTERNAL_PREFIXES):
                    doc["queues"].append({"vhost": v.name, "name": q.name, "type": q.type_name, "durable": True,
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
            for key in ("parameters", "policies", "queues", "exchanges", "bindings"):
                for item in doc[key]:
                    del item["vhost"]
        return doc

    def _user(self, user: Any) -> dict:
        exported = rabbit_passwords.export(user.password_hash)
        algorithm, hashed = exported if exported is not None else (HASHING_ALGORITHM, user.password_hash)
        return {"name": user.name, "password_hash": hashed, "hashing_algorithm": algorithm, "tags": list(user.tags),
                "limits": self._limits("user", user.name)}  # fmt: skip

    def _vhost(self, vhost: Any) -> dict:
        metadata: dict[str, Any] = {"description": vhost.description, "tags": list(vhost.tags)}
        if vhost.default_queue_type:
            metadata["default_queue_type"] = vhost.default_queue_type
        if vhost.protected_from_deletion:
            metadata["protected_from_deletion"] = True
        return {"name": vhost.name, "description": vhost.description, "tags": list(vhost.tags),
                "limits": self._limits("vhost", vhost.name), "metadata": metadata}  # fmt: skip

    def _limits(self, scope: str, name: str) -> dict[str, int]:
        return {limit: value for (s, owner, limit), value in sorted(self.node.projections.limits.items())
                if s == scope and owner == name}  # fmt: skip

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
        """Declares everything in `doc`, in RabbitMQ's order; with `vhost`,
        only parameters, policies and topology, all into that vhost (POST
        /api/definitions/{vhost}). Raises DefinitionsError before changing
        anything when the document is malformed or needs what is not here."""
        check(doc, self.node.projections.feature_flags, vhost is not None)
        run = self.node.metadata.run

        def where(item: dict) -> str:
            return vhost if vhost is not None else item.get("vhost", "/")

        if vhost is None:
            for u in doc.get("users", []):
                stored = password_hash(u, self.node.auth.password_hashing)
                await run(mc.PutUser(new_key(), u["name"], stored, tuple(_tags(u.get("tags")))))
                await self._set_limits("user", u["name"], limits_of(u.get("limits"), "user", ""))
            for v in doc.get("vhosts", []):
                # RabbitMQ 3.x exports a vhost's name only: an existing vhost keeps what the entry lacks
                current = self.node.vhosts.get(v["name"])
                metadata = v.get("metadata") if isinstance(v.get("metadata"), dict) else {}
                description = v.get("description", metadata.get("description", current and current.description))
                tags = v.get("tags", metadata.get("tags", current and current.tags))
                await run(vhost_command(v["name"], description or "", _tags(tags), default_queue_type(v)))
                protect = deletion_protection(v)  # lifted only where it holds: no feature flag needed then
                if protect or (protect is False and current is not None and current.protected_from_deletion):
                    await run(mc.SetVHostDeletionProtection(new_key(), v["name"], protect))
            for p in doc.get("permissions", []):
                await run(mc.SetPermissions(new_key(), p["user"], p["vhost"], p["configure"], p["write"], p["read"]))
            for t in doc.get("topic_permissions", []):
                await run(mc.SetTopicPermissions(new_key(), t["user"], t["vhost"], t["exchange"], t.get("write", ".*"),
                                                 t.get("read", ".*")))  # fmt: skip
            for g in doc.get("global_parameters", []):
                await run(mc.SetGlobalParameter(new_key(), g["name"], g["value"]))
        await self._apply_limits(doc, where)
        for x in doc.get("exchanges", []):
            v = self._vhost_named(where(x))
            await v.declare_exchange(x["name"], x.get("type", "direct"), x.get("durable", True),
                                     x.get("auto_delete", False), x.get("internal", False),
                                     x.get("arguments") or {})  # fmt: skip
        policies = [(mc.SetPolicy, p) for p in doc.get("policies", [])]
        policies += [(mc.SetOperatorPolicy, p) for p in doc.get("operator_policies", []) if vhost is None]
        policies += [(mc.SetOperatorPolicy, {**p["value"], "name": p["name"], "vhost": p.get("vhost", "/")})
                     for p in doc.get("parameters", []) if p["component"] == OPERATOR_POLICY]  # fmt: skip
        for command, p in policies:
            await run(command(new_key(), where(p), p["name"], p["pattern"], p.get("apply-to", "all"),
                              p["definition"], int(p.get("priority", 0))))  # fmt: skip
        for p in doc.get("parameters", []):
            if p["component"] == SHOVEL:  # checked by definitions_check
                self._vhost_named(where(p))
                await run(mc.SetParameter(new_key(), where(p), SHOVEL, p["name"], shovel_definition.encode(p["value"])))
        for q in doc.get("queues", []):
            v = self._vhost_named(where(q))
            arguments = dict(q.get("arguments") or {})
            if q.get("type", "classic") != "classic":  # RabbitMQ 3.x's export of a queue its vhost typed
                arguments.setdefault("x-queue-type", q["type"])
            await v.declare_queue(q["name"], q.get("durable", True), None, q.get("auto_delete", False), arguments)
        for b in doc.get("bindings", []):
            v = self._vhost_named(where(b))
            await v.bind(b["source"], b.get("destination_type", "queue"), b["destination"],
                         b.get("routing_key", ""), b.get("arguments") or {})  # fmt: skip

    async def _apply_limits(self, doc: dict, where: Any) -> None:
        """A vhost's limits: its vhost-limits parameter, else the `limits` of
        its vhost entry; either replaces all of the vhost's limits, as
        RabbitMQ's parameter does."""
        limits: dict[str, dict[str, int]] = {}
        for v in doc.get("vhosts", []):
            given = limits_of(v.get("limits"), "vhost", "")
            if given:
                limits[v["name"]] = given
        for p in doc.get("parameters", []):
            if p["component"] == VHOST_LIMITS:
                limits[where(p)] = p["value"]
        for name, given in limits.items():
            self._vhost_named(name)
            await self._set_limits("vhost", name, given)

    async def _set_limits(self, scope: str, name: str, limits: dict[str, int] | None) -> None:
        """Makes `limits` the whole set of `name`'s limits (None: leaves them)."""
        if limits is None:
            return
        run = self.node.metadata.run
        for (s, owner, limit), _ in list(self.node.projections.limits.items()):
            if s == scope and owner == name and limit not in limits:
                await run(mc.ClearLimit(new_key(), scope, name, limit))
        for limit, value in limits.items():
            await run(mc.SetLimit(new_key(), scope, name, limit, value))

    def _vhost_named(self, name: str) -> Any:
        v = self.node.vhosts.get(name)
        if v is None:
            raise DefinitionsError(f"no vhost '{name}'")
        return v


def vhost_command(name: str, description: str, tags: list[str], queue_type: str | None) -> mc.AddVHost:
    """The command creating or updating a vhost; without a default queue type
    the version 1 command, which keeps the vhost's (and which a cluster whose
    vhost_default_queue_type flag is off still takes)."""
    if queue_type is None:
        return mc.AddVHost(new_key(), name, description, tuple(tags))
    return mc.AddVHostWithQueueType(new_key(), name, description, tuple(tags), queue_type)


def _tags(tags: Any) -> list[str]:
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    return [str(t) for t in tags or []]


def _plain(arguments: Any) -> dict:
    return {str(k): v for k, v in dict(arguments).items()}
