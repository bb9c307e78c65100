"""The RabbitMQ side of `warren migrate`: its HTTP API from a --from URL, its
AMQP URI for the shovels, the AMQP 1.0 address of a queue by its version,
and the definitions document as Warren gets it (--skip, --queue-type)."""

from __future__ import annotations

import copy
import ssl
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from node.ops.ctl_kit import EX_DATAERR, EX_USAGE, Client, CtlError

# the definitions sections whose items have a name, which --skip SECTION:NAME can leave out
_SINGULAR = {
    "users": "user",
    "vhosts": "vhost",
    "queues": "queue",
    "exchanges": "exchange",
    "policies": "policy",
    "operator_policies": "operator policy",
    "parameters": "parameter",
    "global_parameters": "global parameter",
}
NAMED_SECTIONS = tuple(_SINGULAR)
QUEUE_TYPES = ("classic", "quorum", "stream")


def source_client(url: str, timeout: float, cacert: str = "") -> Client:
    """A client of RabbitMQ's management API at http(s)://user:pass@host:port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise CtlError(f"--from: {e}", EX_USAGE) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CtlError("--from must be http(s)://user:password@host:port, RabbitMQ's management API", EX_USAGE)
    if parts.path not in ("", "/") or parts.query:
        raise CtlError("--from names the management API's root: no path or query", EX_USAGE)
    user, password = unquote(parts.username or "guest"), unquote(parts.password or "guest")
    client = Client(parts.hostname, port or (15671 if parts.scheme == "https" else 15672), user, password, timeout)
    client.base = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"
    if parts.scheme == "https":
        client.tls = ssl.create_default_context(cafile=cacert or None)
    return client


def amqp_uri(from_url: str, amqp: str | None) -> str:
    """The AMQP URI the shovels read RabbitMQ through: --amqp, else the
    management host on 5672 (5671 for https) with the same credentials."""
    if amqp:
        parts = urlsplit(amqp)
        if parts.scheme not in ("amqp", "amqps") or not parts.hostname or parts.path not in ("", "/"):
            raise CtlError("--amqp must be amqp(s)://user:password@host:port, no vhost (each queue's is added)",
                           EX_USAGE)  # fmt: skip
        return f"{parts.scheme}://{parts.netloc}"
    parts = urlsplit(from_url)
    tls = parts.scheme == "https"
    credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else "guest:guest@"
    return f"{'amqps' if tls else 'amqp'}://{credentials}{parts.hostname}:{5671 if tls else 5672}"


def vhost_uri(uri: str, vhost: str) -> str:
    return f"{uri}/{quote(vhost, safe='')}"


def queue_address(version: str, name: str) -> str:
    """RabbitMQ 3.x's AMQP 1.0 plugin takes v1 addresses, RabbitMQ 4 the v2 ones."""
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise CtlError(f"RabbitMQ reports version {version!r}, not one this migration knows", EX_DATAERR) from None
    return f"/queues/{quote(name, safe='')}" if major >= 4 else f"/amq/queue/{name}"


def parse_skip(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        section, _, name = item.partition(":")
        if section not in NAMED_SECTIONS or not name:
            raise CtlError(f"--skip {item!r}: give SECTION:NAME, SECTION one of {', '.join(NAMED_SECTIONS)}",
                           EX_USAGE)  # fmt: skip
        out.append((section, name))
    return out


def prepare(doc: dict, skip: list[tuple[str, str]], queue_type: str | None) -> tuple[dict, list[str]]:
    """The document Warren is given, and a line for each thing left out.
    A --skip that names nothing in the document is an error: it would say
    something was skipped that was not. Skipping a queue or an exchange
    leaves out its bindings too (they could not be declared)."""
    doc = copy.deepcopy(doc)
    skipped: list[str] = []
    gone: set[tuple[str, str, str]] = set()  # (kind, vhost, name) of skipped queues and exchanges
    for section, name in skip:
        items = doc.get(section) or []
        keep = [i for i in items if i.get("name") != name]
        if len(keep) == len(items):
            raise CtlError(f"--skip {section}:{name}: RabbitMQ's definitions have no such item", EX_USAGE)
        for item in items:
            if item.get("name") == name:
                where = f" in vhost '{item['vhost']}'" if "vhost" in item else ""
                skipped.append(f"skipped {_SINGULAR[section]} '{name}'{where}")
                if section in ("queues", "exchanges"):
                    gone.add((section[:-1], item.get("vhost", "/"), name))
        doc[section] = keep
    bindings = []
    for b in doc.get("bindings") or []:
        v = b.get("vhost", "/")
        target = (b.get("destination_type", "queue"), v, b.get("destination"))
        if ("exchange", v, b.get("source")) in gone or target in gone:
            skipped.append(f"skipped binding {b.get('source')!r} -> {b.get('destination')!r} in vhost '{v}'")
        else:
            bindings.append(b)
    if "bindings" in doc:
        doc["bindings"] = bindings
    if queue_type is not None:
        if queue_type not in QUEUE_TYPES:
            raise CtlError(f"--queue-type must be one of {', '.join(QUEUE_TYPES)}", EX_USAGE)
        for q in doc.get("queues") or []:
            args = q.get("arguments") or {}
            if q.get("type", args.get("x-queue-type", "classic")) == "classic":
                q["type"] = queue_type
                q["arguments"] = {**args, "x-queue-type": queue_type}
    return doc, skipped


def source_version(client: Client) -> str:
    overview = client.get("/api/overview")
    version = overview.get("rabbitmq_version") if isinstance(overview, dict) else None
    if not isinstance(version, str):
        raise CtlError(f"{client.base} does not look like RabbitMQ's management API (no rabbitmq_version)", EX_DATAERR)
    return version


def source_queues(client: Client) -> dict[tuple[str, str], int]:
    """(vhost, name) -> messages, as RabbitMQ's statistics say now."""
    rows: Any = client.get("/api/queues?columns=name,vhost,messages")
    return {(q["vhost"], q["name"]): int(q.get("messages") or 0) for q in rows}
