"""Definitions: the whole topology as one JSON document, in RabbitMQ's shape.

`document()` exports what the metadata holds (GET /api/definitions);
`load(path)` declares everything in a definitions file through the metadata
store (the `definitions_file` setting, like RabbitMQ's load_definitions),
each declaration idempotent, so loading the same file on every start or on
every node changes nothing the second time.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from metadata import commands as mc
from node.vhosts.metadata_store import new_key
from routing.users import hash_password

if TYPE_CHECKING:
    from node.broker import Broker

FORMAT_VERSION = 1
HASHING_ALGORITHM = "warren_pbkdf2_sha256"  # routing/users.py's format


class DefinitionsFile:
    def __init__(self, broker: Broker):
        self.broker = broker

    def document(self) -> dict:
        """Everything durable, as GET /api/definitions exports it."""
        auth = self.broker.auth
        doc: dict = {
            "version": FORMAT_VERSION,
            "vhosts": [_vhost(v) for v in self.broker.vhosts.values()],
            "users": [{"name": u.name, "password_hash": u.password_hash, "hashing_algorithm": HASHING_ALGORITHM,
                       "tags": u.tags} for u in auth.users.values()],
            "permissions": [{"user": user, "vhost": vhost, "configure": p.configure, "write": p.write,
                             "read": p.read} for (user, vhost), p in auth.permissions.items()],
            "policies": self._policies(False),
            "operator_policies": self._policies(True),
            "queues": [],
            "exchanges": [],
            "bindings": [],
        }  # fmt: skip
        for vhost in self.broker.vhosts.values():
            for q in vhost.queues.values():
                if q.durable and q.exclusive_owner is None:
                    doc["queues"].append({"vhost": vhost.name, "name": q.name, "durable": True,
                                          "auto_delete": q.auto_delete, "arguments": _plain(q.arguments)})  # fmt: skip
            for x in vhost.routing.exchanges():
                if x.durable and x.name and not x.name.startswith("amq."):
                    doc["exchanges"].append({"vhost": vhost.name, "name": x.name, "type": str(x.type),
                                             "durable": True, "auto_delete": x.auto_delete, "internal": x.internal,
                                             "arguments": _plain(x.arguments)})  # fmt: skip
            for b in vhost.routing.list_bindings():
                doc["bindings"].append({"vhost": vhost.name, "source": b.source,
                                        "destination_type": str(b.destination_kind), "destination": b.destination,
                                        "routing_key": b.binding_key, "arguments": _plain(b.arguments)})  # fmt: skip
        return doc

    def _policies(self, operator: bool) -> list[dict]:
        projections = self.broker.projections
        return [{"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
                 "definition": _plain(p.definition), "priority": p.priority}
                for vhost in self.broker.vhosts for p in projections.vhost_policies(vhost, operator)]  # fmt: skip

    async def load(self, path: str) -> None:
        with open(path) as f:
            doc = json.load(f)
        await self.apply(doc)

    async def apply(self, doc: dict) -> None:
        """Declares everything in `doc`, in dependency order."""
        run = self.broker.metadata.run
        for v in doc.get("vhosts", []):
            await run(mc.AddVHost(new_key(), v["name"], v.get("description", ""), tuple(v.get("tags") or ())))
        for u in doc.get("users", []):
            tags = u.get("tags") or []
            tags = tags.split(",") if isinstance(tags, str) else tags
            if u.get("hashing_algorithm") == HASHING_ALGORITHM:
                password_hash = u["password_hash"]
            else:
                password_hash = hash_password(u["password"]) if u.get("password") else ""
            await run(mc.PutUser(new_key(), u["name"], password_hash, tuple(tags)))
        for p in doc.get("permissions", []):
            await run(mc.SetPermissions(new_key(), p["user"], p["vhost"], p["configure"], p["write"], p["read"]))
        for x in doc.get("exchanges", []):
            vhost = self.broker.vhosts[x.get("vhost", "/")]
            await vhost.declare_exchange(x["name"], x.get("type", "direct"), x.get("durable", True),
                                         x.get("auto_delete", False), x.get("internal", False),
                                         x.get("arguments") or {})  # fmt: skip
        for q in doc.get("queues", []):
            vhost = self.broker.vhosts[q.get("vhost", "/")]
            await vhost.declare_queue(q["name"], q.get("durable", True), None, q.get("auto_delete", False),
                                      q.get("arguments") or {})  # fmt: skip
        for b in doc.get("bindings", []):
            vhost = self.broker.vhosts[b.get("vhost", "/")]
            await vhost.bind(b["source"], b.get("destination_type", "queue"), b["destination"],
                             b.get("routing_key", ""), b.get("arguments") or {})  # fmt: skip
        for key, command in (("policies", mc.SetPolicy), ("operator_policies", mc.SetOperatorPolicy)):
            for p in doc.get(key, []):
                await run(command(new_key(), p.get("vhost", "/"), p["name"], p["pattern"], p.get("apply-to", "all"),
                                  p["definition"], int(p.get("priority", 0))))  # fmt: skip


def _vhost(vhost: Any) -> dict:
    return {"name": vhost.name, "description": vhost.description, "tags": list(vhost.tags)}


def _plain(arguments: Any) -> dict:
    return {str(k): v for k, v in dict(arguments).items()}
