"""Walks docs/compatibility.toml, the list of every key RabbitMQ 4.2 acts on,
against a real node over the HTTP API (issue 31): a refused or pending key is
refused naming it (a 4xx whose reason holds the entry's `error`); an
implemented key is accepted with the entry's `value`, and each test it names
exists; an entry's `invalid` value is refused naming the key, as RabbitMQ
refuses it. Nothing RabbitMQ acts on is accepted and then ignored."""

from __future__ import annotations

import ast
import importlib.util
import itertools
from functools import cache
from pathlib import Path
from urllib.parse import quote

from queues.arguments import NOT_YET, QUEUE_ARGUMENTS

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("compatibility_table", REPO / "scripts" / "compatibility_table.py")
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)

ENTRIES = table.entries()
STATUSES = ("implemented", "refused", "pending")
WALKED = ("queue argument", "exchange argument", "binding argument", "policy key", "operator policy key", "vhost field",
          "vhost limit", "user limit")  # fmt: skip
NOT_WALKED = ("consumer property", "message annotation", "exchange type", "definitions key")  # over AMQP: their tests say
_names = itertools.count()


def of_kind(kind: str) -> list[dict]:
    return [e for e in ENTRIES if e["kind"] == kind]


def keys_of(entry: dict) -> list[str]:
    """'a, b' covers the keys a and b alike."""
    return [k.strip() for k in entry["key"].split(",")]


def refusal(reply, entry: dict, key: str, want: str | None = None) -> str | None:
    """What is wrong with `reply` as a refusal of `key` (None: nothing)."""
    reason = str(reply.body.get("reason", "")) if isinstance(reply.body, dict) else str(reply.body)
    if not 400 <= reply.status < 500:
        return f"{entry['kind']} {key}: {reply.status}, not refused"
    if want is not None and want not in reason:
        return f"{entry['kind']} {key}: reason {reason!r} lacks {want!r}"
    if want is None and key not in reason:
        return f"{entry['kind']} {key}: reason {reason!r} does not name it"
    return None


def walk(entries: list[dict], declare) -> None:
    """`declare(entry, key, value)` -> the reply; every problem is reported at once."""
    problems = []
    for entry in entries:
        for key in keys_of(entry):
            if entry["status"] == "implemented":
                if "value" in entry:
                    reply = declare(entry, key, entry["value"])
                    if reply.status not in (200, 201, 204):
                        problems.append(f"{entry['kind']} {key}={entry['value']!r}: {reply.status} {reply.body}")
            else:
                problems.append(refusal(declare(entry, key, entry["value"]), entry, key, entry["error"]))
            if "invalid" in entry:
                problems.append(refusal(declare(entry, key, entry["invalid"]), entry, key))
    assert [p for p in problems if p] == []


# ------------------------------------------------------------------ the list itself


def test_every_entry_is_complete():
    """A refusal is proven by the walk below for the kinds declared over HTTP, else by tests named."""
    for e in ENTRIES:
        assert {"kind", "types", "key", "rabbitmq", "bad", "status"} <= e.keys(), e
        assert e["kind"] in WALKED or e["kind"] in NOT_WALKED, e
        assert e["status"] in STATUSES, e
        if e["status"] == "implemented":
            assert e.get("tests"), e
        else:
            assert e.get("error"), e
            assert "value" in e if e["kind"] in WALKED else e.get("tests"), e


@cache
def _functions(path: Path) -> frozenset[str]:
    """'name' and 'Class::name' for every test function in the file."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.add(node.name)
        elif isinstance(node, ast.ClassDef):
            out |= {f"{node.name}::{f.name}" for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    return frozenset(out)


def test_every_named_test_exists():
    missing = []
    for e in ENTRIES:
        for node_id in e.get("tests", ()):
            path, _, name = node_id.partition("::")
            file = REPO / path
            if not file.is_file() or name.split("[")[0] not in _functions(file):
                missing.append(node_id)
    assert missing == []


def test_the_document_shows_the_list():
    assert (REPO / "docs" / "compatibility.md").read_text() == table.rendered_document(), (
        "docs/compatibility.md is stale: run .venv/bin/python scripts/compatibility_table.py")


def test_every_queue_argument_rabbitmq_knows_is_in_the_list():
    listed = {(k, t) for e in of_kind("queue argument") for k in keys_of(e) for t in e["types"]}
    known = {(k, t) for t, keys in QUEUE_ARGUMENTS.items() for k in keys}
    assert known - listed == set()
    assert {k for e in of_kind("queue argument") if e["status"] == "pending" for k in keys_of(e)} == set(NOT_YET)


# ------------------------------------------------------------------ against a node


def declare_queue(api, entry: dict, key: str, value, queue_type: str):
    arguments = {"x-queue-type": queue_type, **entry.get("with", {}), key: value}
    if key == "x-queue-type":
        arguments[key] = queue_type if value == "<type>" else value
    return api.put(f"/api/queues/%2F/compat-{next(_names)}", {"durable": True, "arguments": arguments})


def test_queue_arguments_as_the_table_says(api, node):
    for queue_type in QUEUE_ARGUMENTS:
        walk([e for e in of_kind("queue argument") if queue_type in e["types"]],
             lambda e, k, v, t=queue_type: declare_queue(api, e, k, v, t))  # fmt: skip


def test_an_argument_of_another_queue_type_is_refused_naming_it(api, node):
    problems = []
    listed = {(k, t) for e in of_kind("queue argument") for k in keys_of(e) for t in e["types"]}
    for queue_type, keys in QUEUE_ARGUMENTS.items():
        for key in sorted(set().union(*QUEUE_ARGUMENTS.values()) - keys):
            if (key, queue_type) in listed:  # refused with a reason of its own, walked with the list
                continue
            reply = declare_queue(api, {}, key, 1, queue_type)
            problems.append(refusal(reply, {"kind": queue_type}, key, f"invalid arg '{key}' for a queue of type "
                                                                      f"{queue_type}"))  # fmt: skip
    assert [p for p in problems if p] == []


def test_a_dead_letter_routing_key_needs_a_dead_letter_exchange(api, node):
    for queue_type in ("classic", "quorum"):
        reply = declare_queue(api, {}, "x-dead-letter-routing-key", "dead", queue_type)
        assert reply.status == 400 and "requires x-dead-letter-exchange" in reply.body["reason"], reply.body


def test_an_argument_no_queue_type_knows_is_kept_as_rabbitmq_keeps_it(api, node):
    for queue_type in QUEUE_ARGUMENTS:
        name = f"own-{queue_type}"
        body = {"durable": True, "arguments": {"x-queue-type": queue_type, "x-my-own": "kept"}}
        assert api.put(f"/api/queues/%2F/{name}", body).status == 201
        assert api.get(f"/api/queues/%2F/{name}").body["arguments"]["x-my-own"] == "kept"


def test_exchange_and_binding_arguments_as_the_table_says(api, node):
    walk(of_kind("exchange argument"), lambda e, k, v: api.put(
        f"/api/exchanges/%2F/compat-{next(_names)}", {"type": e.get("exchange_type", "fanout"), "arguments": {k: v}}))  # fmt: skip
    assert api.put("/api/queues/%2F/bound", {"durable": True}).status == 201
    walk(of_kind("binding argument"), lambda e, k, v: api.post(
        "/api/bindings/%2F/e/amq.headers/q/bound", {"routing_key": "", "arguments": {k: v, "h": "1"}}))  # fmt: skip
    assert api.put("/api/exchanges/%2F/own", {"type": "topic", "arguments": {"x-my-own": 1}}).status in (201, 204)


def test_policy_keys_as_the_table_says(api, node):
    assert api.put("/api/feature_flags/operator_policies/enable", {}).status in (200, 204)
    for kind, path in (("policy key", "policies"), ("operator policy key", "operator-policies")):
        walk(of_kind(kind), lambda e, k, v, path=path: api.put(
            f"/api/{path}/%2F/compat-{next(_names)}",
            {"pattern": "^compat-", "definition": {**e.get("with", {}), k: v}}))  # fmt: skip


def test_vhost_fields_as_the_table_says(api, node):
    walk(of_kind("vhost field"), lambda e, k, v: api.put(f"/api/vhosts/{quote('compat-' + str(next(_names)))}",
                                                         {k: v}))  # fmt: skip
    assert api.put("/api/vhosts/plain", {"default_queue_type": "classic", "tracing": False}).status == 201


def test_topic_permissions_and_operator_policies_are_imported(api, node):
    for flag in ("topic_permissions", "operator_policies"):
        assert api.put(f"/api/feature_flags/{flag}/enable", {}).status in (200, 204)
    topic = {"user": "guest", "vhost": "/", "exchange": "amq.topic", "write": "^w", "read": "^r"}
    operator = {"vhost": "/", "name": "o", "pattern": "^b", "apply-to": "queues", "definition": {"max-length": 9},
                "priority": 1}  # fmt: skip
    assert api.post("/api/definitions", {"topic_permissions": [topic], "operator_policies": [operator]}).status == 204
    assert api.get("/api/topic-permissions").body == [topic]
    assert api.get("/api/operator-policies").body == [operator]


def test_limits_as_the_table_says(api, node):
    walk(of_kind("vhost limit"), lambda e, k, v: api.put(f"/api/vhost-limits/%2F/{k}", {"value": v}))
    walk(of_kind("user limit"), lambda e, k, v: api.put(f"/api/user-limits/guest/{k}", {"value": v}))
