"""Durable topology kept on the node's disk until [4/7] moves it into Raft.

The file is rewritten whole on each change: write a temp file, fsync it,
rename it over the old one, fsync the directory. A crash leaves either the old
or the new file, never a torn one.
"""

from __future__ import annotations

import json
import os
from typing import Any

FORMAT_VERSION = 1
HASHING_ALGORITHM = "warren_pbkdf2_sha256"  # node/auth.py's format


class DefinitionsFile:
    def __init__(self, path: str, node: Any):
        self.path = path
        self.node = node
        self.loading = False

    def save(self) -> None:
        if self.loading:
            return
        doc = self.document()
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def document(self) -> dict:
        """Everything durable, as written to the file (and exported by GET
        /api/definitions)."""
        auth = self.node.auth
        doc: dict = {
            "version": FORMAT_VERSION,
            "vhosts": [_vhost(v) for v in self.node.vhosts.values()],
            "users": [{"name": u.name, "password_hash": u.password_hash, "hashing_algorithm": HASHING_ALGORITHM,
                       "tags": u.tags} for u in auth.users.values()],
            "permissions": [{"user": user, "vhost": vhost, "configure": p.configure, "write": p.write,
                             "read": p.read} for (user, vhost), p in auth.permissions.items()],
            "queues": [],
            "exchanges": [],
            "bindings": [],
        }  # fmt: skip
        for vhost in self.node.vhosts.values():
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

    def load(self, path: str | None = None) -> None:
        """Declares everything in the file (ours, or a user's definitions file)."""
        path = path or self.path
        if not os.path.exists(path):
            return
        with open(path) as f:
            doc = json.load(f)
        self.loading = True
        try:
            for v in doc.get("vhosts", []):
                vhost = self.node.ensure_vhost(v["name"])
                if "description" in v:
                    vhost.description = v["description"]
                if "tags" in v:
                    vhost.tags = list(v["tags"] or [])
            auth = self.node.auth
            for u in doc.get("users", []):
                tags = u.get("tags") or []
                tags = tags.split(",") if isinstance(tags, str) else tags
                if u.get("hashing_algorithm") == HASHING_ALGORITHM:
                    auth.add_user(u["name"], None, tags, password_hash=u["password_hash"])
                else:
                    auth.add_user(u["name"], u.get("password"), tags)
            for p in doc.get("permissions", []):
                auth.set_permissions(p["user"], p["vhost"], p["configure"], p["write"], p["read"])
            for x in doc.get("exchanges", []):
                vhost = self.node.ensure_vhost(x.get("vhost", "/"))
                vhost.declare_exchange(x["name"], x.get("type", "direct"), x.get("durable", True),
                                       x.get("auto_delete", False), x.get("internal", False),
                                       x.get("arguments") or {})  # fmt: skip
            for q in doc.get("queues", []):
                vhost = self.node.ensure_vhost(q.get("vhost", "/"))
                vhost.declare_queue(q["name"], q.get("durable", True), None, q.get("auto_delete", False),
                                    q.get("arguments") or {})  # fmt: skip
            for b in doc.get("bindings", []):
                vhost = self.node.ensure_vhost(b.get("vhost", "/"))
                vhost.bind(b["source"], b.get("destination_type", "queue"), b["destination"],
                           b.get("routing_key", ""), b.get("arguments") or {})  # fmt: skip
        finally:
            self.loading = False
        if path != self.path:
            self.save()


def _vhost(vhost: Any) -> dict:
    return {"name": vhost.name, "description": vhost.description, "tags": list(vhost.tags)}


def _plain(arguments: Any) -> dict:
    return {str(k): v for k, v in dict(arguments).items()}
