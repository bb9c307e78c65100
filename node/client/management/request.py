"""Management requests of the HTTP API v2 over AMQP (RabbitMQ 4's
rabbit_amqp_management), as a function of (caller, method, target, body).

A request is what the client put in an AMQP message: `subject` is the HTTP
method, `to` the request target (a path, percent-encoded names, maybe a
query), the body an amqp-value. `handle` returns the reply's status code (a
string, as it goes in the reply's `subject`) and body (an amqp-value: a map,
a list, null, or on error a string explaining it).

Endpoints (the vhost is the connection's):

    GET    /queues/:queue              queue info                       200
    PUT    /queues/:queue              declare: 201 created, 200 existed
    DELETE /queues/:queue              {"message_count": n}             200
    DELETE /queues/:queue/messages     purge, {"message_count": n}      200
    PUT    /exchanges/:exchange        declare                          204
    DELETE /exchanges/:exchange        (also when absent)               204
    POST   /bindings                   bind                             204
    GET    /bindings?src=&dstq=|dste=&key=   matching bindings          200
    DELETE /bindings/src=;dstq=|dste=;key=;args=  (also when absent)    204
    GET    /bindings/src=;dstq=|dste=;key=;args=  one binding       200/404
    PUT    /auth/tokens                a new OAuth 2 token (the body)   204, 401 refused

Status codes follow RabbitMQ where its management_SUITE pins them: 400 bad
request (bad body, bad name, invalid argument, exclusive queue of another
connection), 403 refused (permissions, the default exchange, the reserved
"amq." prefix), 404 not found, 409 precondition failed (redeclaration with
other properties). Two choices of ours: a queue type this node cannot run
yet (stream) is 501 Not Implemented, which a client that only looks
at the status (the Python client does) still reports unambiguously; and a
missing queue or exchange is 404 for purge and bind too, where RabbitMQ says
400. A routing error maps to a status by its AMQP condition (STATUS_BY_CONDITION).

An empty queue name is refused (400) as RabbitMQ does: its clients generate
names themselves ("client.gen-..."); server-named queues are not part of v2.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from amqp.errors import Condition
from amqp.types import Array, UInt, ULong
from node.vhosts.metadata_store import MetadataUnavailable
from node.vhosts.remote_queue import refresh_counts
from node.vhosts.vhost import ResourceLocked
from queues.equivalence import shown
from queues.volatile import is_volatile
from routing import permissions, topic_permissions
from routing.address import quote_segment, unquote_segment
from routing.delayed import check_internal
from routing.errors import NotFound, PreconditionFailed, RoutingError
from routing.oauth import TokenRefused

log = logging.getLogger("warren.management")

OK, CREATED, NO_CONTENT = "200", "201", "204"
UNAUTHORIZED = "401"
BAD_REQUEST, FORBIDDEN, NOT_FOUND, NOT_ALLOWED, CONFLICT = "400", "403", "404", "405", "409"
INTERNAL, NOT_IMPLEMENTED, UNAVAILABLE = "500", "501", "503"

# How a routing, vhost or permission error answers, by its AMQP condition.
STATUS_BY_CONDITION = {
    Condition.NOT_FOUND: NOT_FOUND,
    Condition.PRECONDITION_FAILED: CONFLICT,
    Condition.UNAUTHORIZED_ACCESS: FORBIDDEN,
    Condition.NOT_ALLOWED: FORBIDDEN,  # the default exchange, built-in exchanges
    Condition.RESOURCE_LIMIT_EXCEEDED: FORBIDDEN,  # RabbitMQ: queue limit exceeded
    Condition.RESOURCE_LOCKED: BAD_REQUEST,  # an exclusive queue of another connection
    Condition.INVALID_FIELD: BAD_REQUEST,
    Condition.DECODE_ERROR: BAD_REQUEST,
    Condition.NOT_IMPLEMENTED: NOT_IMPLEMENTED,
}

DEFAULT_QUEUE_TYPE = "classic"
RESERVED_PREFIX = "amq."
# The queue arguments whose values must match when a queue is redeclared
# (RabbitMQ compares only those its queue type knows; others are kept as given).
EQUIVALENCE_ARGUMENTS = (
    "x-queue-type", "x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
    "x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-version",
    "x-single-active-consumer", "x-queue-master-locator", "x-queue-leader-locator",
)  # fmt: skip

# RabbitMQ's binding path segment: names percent-encoded, the arguments as a
# URL-safe base64 hash ("" for none).
_BINDING_SEGMENT = re.compile(
    r"^src=([0-9A-Za-z\-._~%]+);dst([eq])=([0-9A-Za-z\-._~%]+);key=([0-9A-Za-z\-._~%]*);args=([0-9A-Za-z\-_]*)$"
)
_KIND = {"q": "queue", "e": "exchange"}


class ManagementError(Exception):
    """A refusal with its status code; the message is the reply body."""

    status = BAD_REQUEST

    def __init__(self, message: str, status: str | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class Forbidden(ManagementError):
    status = FORBIDDEN


@dataclass
class Caller:
    """Who asks, and where: the connection's vhost and user, the user's
    permission entry for it (None: no access), and the connection itself,
    which owns the exclusive queues it declares; and what the node knows
    beyond the vhost: the topic permissions (in the projections) and the
    Direct Reply-To queues (node/vhosts/volatile_queues.py)."""

    vhost: Any
    user: str
    permission: permissions.Permission | None
    owner: Any
    node_name: str
    projections: Any
    reply_queues: Any
    name_of: Callable[[str], str] = str  # a cluster member's node name, from its address

    def check(self, kind: str, resource: str, what: str) -> None:
        permissions.check(self.permission, self.user, self.vhost.name, kind, resource, what)


async def handle(caller: Caller, method: Any, target: Any, body: Any) -> tuple[str, Any]:
    """Serves one request; never raises."""
    try:
        return await _dispatch(caller, method, target, body)
    except ManagementError as e:
        return e.status, str(e)
    except MetadataUnavailable as e:  # no majority: a minority node refuses metadata changes
        return UNAVAILABLE, e.description or "the cluster has no majority"
    except RoutingError as e:
        return STATUS_BY_CONDITION.get(e.condition, BAD_REQUEST), e.description or e.condition
    except Exception:  # a bug of ours costs one request, never the link
        log.exception("management request %s %s failed", method, target)
        return INTERNAL, "internal error"


# ---------------------------------------------------------------- routing


async def _dispatch(caller: Caller, method: Any, target: Any, body: Any) -> tuple[str, Any]:
    if not isinstance(method, str) or not method:
        raise ManagementError("request has no HTTP method in 'subject'")
    if not isinstance(target, str) or not target.startswith("/"):
        raise ManagementError(f"bad request target {target!r}")
    path, _, query = target.partition("?")
    segments = path[1:].split("/")
    head, rest = segments[0], segments[1:]
    if head == "queues" and not rest:
        return await _route({"POST": post_queue}, method, target)(caller, "", body)
    if head == "queues" and len(rest) == 1:
        routes = {"GET": get_queue, "PUT": put_queue, "DELETE": delete_queue}
        return await _route(routes, method, target)(caller, _name(rest[0]), body)
    if head == "queues" and len(rest) == 2 and rest[1] == "messages":
        return await _route({"DELETE": purge_queue}, method, target)(caller, _name(rest[0]), body)
    if head == "exchanges" and len(rest) == 1:
        routes = {"PUT": put_exchange, "DELETE": delete_exchange}
        return await _route(routes, method, target)(caller, _name(rest[0]), body)
    if head == "bindings" and not rest:
        routes = {"POST": post_binding, "GET": get_bindings}
        return await _route(routes, method, target)(caller, query, body)
    if head == "bindings" and len(rest) == 1:
        routes = {"DELETE": delete_binding, "GET": get_binding}
        return await _route(routes, method, target)(caller, rest[0], body)
    if head == "auth" and rest == ["tokens"]:
        return await _route({"PUT": put_token}, method, target)(caller, "", body)
    raise ManagementError(f"no such resource: {path}", NOT_FOUND)


def _route(routes: dict, method: str, target: str) -> Any:
    fn = routes.get(method)
    if fn is None:
        raise ManagementError(f"method {method} not allowed on {target} (allowed: {', '.join(routes)})",
                              NOT_ALLOWED)  # fmt: skip
    return fn


def _name(segment: str) -> str:
    name = unquote_segment(segment)  # AddressError (invalid-field): 400
    _no_line_breaks(name)
    return name


def _no_line_breaks(name: str) -> None:
    if "\n" in name or "\r" in name:
        raise ManagementError(f"Bad name '{name}': line feed and carriage return characters not allowed")


def _no_body(body: Any) -> None:
    if body is not None:
        raise ManagementError("this request takes no body (null expected)")


# ---------------------------------------------------------------- bodies


def _properties(body: Any, kind: str, fields: dict[str, type], defaults: dict[str, Any]) -> dict[str, Any]:
    """A declaration body: a map of known fields of the right type."""
    if not isinstance(body, dict):
        raise ManagementError(f"bad {kind} properties {body!r}: a map is expected")
    out = dict(defaults)
    for key, value in body.items():
        expected = fields.get(key) if isinstance(key, str) else None
        if key == "arguments":
            out[key] = _arguments(value)
        elif expected is None or not isinstance(value, expected):
            raise ManagementError(f"bad {kind} property {key!r}: {value!r}")
        else:
            out[key] = value
    return out


def _arguments(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ManagementError(f"unsupported arguments {value!r}: a map with string keys is expected")
    return {str(k): v for k, v in value.items()}


_QUEUE_FIELDS = {"durable": bool, "exclusive": bool, "auto_delete": bool, "arguments": dict}
_QUEUE_DEFAULTS = {"durable": True, "exclusive": False, "auto_delete": False, "arguments": {}}
_EXCHANGE_FIELDS = {"type": str, "durable": bool, "auto_delete": bool, "internal": bool, "arguments": dict}
_EXCHANGE_DEFAULTS = {"type": "direct", "durable": True, "auto_delete": False, "internal": False, "arguments": {}}
_BINDING_FIELDS = {"source": str, "destination_queue": str, "destination_exchange": str, "binding_key": str,
                   "arguments": dict}  # fmt: skip


# ---------------------------------------------------------------- queues


def queue_info(queue: Any, node_name: str, name_of: Callable[[str], str] = str) -> dict[str, Any]:
    """The reply body describing a queue; `node_name` leads the queues not led elsewhere; a
    replicated queue's leader and replicas by node name (`name_of` their addresses), as RabbitMQ."""
    leader = getattr(queue, "leader", None)
    leader = node_name if leader is None else name_of(leader)
    return {
        "name": queue.name,
        "vhost": queue.vhost,
        "durable": queue.durable,
        "auto_delete": queue.auto_delete,
        "exclusive": queue.exclusive_owner is not None,
        "type": queue.type_name,
        "arguments": dict(queue.arguments),
        "message_count": ULong(queue.message_count),
        "consumer_count": UInt(queue.consumer_count),
        "leader": leader,
        "replicas": Array([name_of(r) for r in getattr(queue, "replicas", None) or []] or [leader]),
        **_policy_info(queue),
    }


def _policy_info(queue: Any) -> dict[str, Any]:
    """The policies in effect (node/vhosts/policies.py), under the HTTP API's names."""
    state = getattr(queue, "policy_state", None)
    if state is None:
        return {"policy": None, "operator_policy": None, "effective_policy_definition": {}}
    return {"policy": state.policy, "operator_policy": state.operator_policy,
            "effective_policy_definition": dict(state.definition)}  # fmt: skip


async def get_queue(caller: Caller, name: str, body: Any) -> tuple[str, Any]:
    # RabbitMQ checks no permission to read a queue's info
    if is_volatile(name):
        return OK, _reply_address_info(caller, name)
    queue = _queue(caller, name)
    await refresh_counts([queue])  # a queue another node hosts: its counts from there
    return OK, queue_info(queue, caller.node_name, caller.name_of)


def _reply_address_info(caller: Caller, name: str) -> dict[str, Any]:
    """A responder asking whether a Direct Reply-To requester is still there
    (RabbitMQ answers 200 or 404 the same way). Another node's requester is
    taken on trust, as when a sender attaches to its address."""
    vhost = caller.vhost
    if not caller.reply_queues.exists(vhost.name, name):
        raise NotFound(f"queue '{name}' in vhost '{vhost.name}' not found")
    return {"name": name, "vhost": vhost.name, "durable": False, "auto_delete": True, "exclusive": False,
            "type": "rabbit_volatile_queue", "arguments": {}, "message_count": ULong(0),
            "consumer_count": UInt(1)}  # fmt: skip


async def put_queue(caller: Caller, name: str, body: Any) -> tuple[str, Any]:
    props = _properties(body, "queue", _QUEUE_FIELDS, _QUEUE_DEFAULTS)
    if not name:
        raise ManagementError("declare queue with empty name not allowed")
    if name.startswith(RESERVED_PREFIX):
        raise Forbidden(f"queue '{name}' in vhost '{caller.vhost.name}' starts with reserved prefix '{RESERVED_PREFIX}'")
    return await _declare_queue(caller, name, props)


async def post_queue(caller: Caller, _: str, body: Any) -> tuple[str, Any]:
    """Declares a server-named queue (amq.gen-...); the reply names it."""
    props = _properties(body, "queue", _QUEUE_FIELDS, _QUEUE_DEFAULTS)
    name = "amq.gen-" + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    return await _declare_queue(caller, name, props)


async def _declare_queue(caller: Caller, name: str, props: dict) -> tuple[str, Any]:
    vhost = caller.vhost
    caller.check("configure", name, "queue")
    durable, exclusive, auto_delete = props["durable"], props["exclusive"], props["auto_delete"]
    arguments = vhost.with_default_type(durable, exclusive, auto_delete, props["arguments"])
    existing = vhost.queues.get(name)
    if existing is not None:
        assert_equivalent(existing, vhost.name, durable, exclusive, auto_delete, arguments, caller.owner)
        if hasattr(existing, "touch"):
            existing.touch()  # a redeclaration counts as use (x-expires)
        await refresh_counts([existing])
        return OK, queue_info(existing, caller.node_name, caller.name_of)
    dlx = arguments.get("x-dead-letter-exchange")
    if dlx is not None:
        if not isinstance(dlx, str):
            raise ManagementError(f"invalid type for arg 'x-dead-letter-exchange': {dlx!r}")
        # dead-lettering reads from this queue and publishes to that exchange
        caller.check("read", name, "queue")
        caller.check("write", dlx, "exchange")
    queue, _ = await vhost.declare_queue(name, durable, caller.owner if exclusive else None, auto_delete, arguments,
                                         caller.user)  # fmt: skip
    return CREATED, queue_info(queue, caller.node_name, caller.name_of)


def assert_equivalent(queue: Any, vhost: str, durable: bool, exclusive: bool, auto_delete: bool,
                      arguments: dict, owner: Any) -> None:  # fmt: skip
    """A redeclaration must match the queue (RabbitMQ's assert_equivalence):
    exclusivity first (400, resource-locked), then the properties and the
    arguments the queue type knows (409, precondition-failed)."""
    if (queue.exclusive_owner is not None and queue.exclusive_owner is not owner) or (
        (queue.exclusive_owner is not None) != exclusive
    ):
        raise ResourceLocked(
            f"cannot obtain exclusive access to locked queue '{queue.name}' in vhost '{vhost}'. It could be "
            "originally declared on another connection or the exclusive property value does not match that of "
            "the original declaration."
        )
    for field, have, want in (("durable", queue.durable, durable), ("auto_delete", queue.auto_delete, auto_delete)):
        if have != want:
            raise PreconditionFailed(f"inequivalent arg '{field}' for queue '{queue.name}' in vhost '{vhost}': "
                                     f"received '{shown(want)}' but current is '{shown(have)}'")  # fmt: skip
    for key in EQUIVALENCE_ARGUMENTS:
        have, want = queue.arguments.get(key), arguments.get(key)
        if key == "x-queue-type":
            have, want = have or DEFAULT_QUEUE_TYPE, want or DEFAULT_QUEUE_TYPE
        if have != want or isinstance(have, bool) != isinstance(want, bool):
            raise PreconditionFailed(f"inequivalent arg '{key}' for queue '{queue.name}' in vhost '{vhost}': "
                                     f"received {shown(want)!r} but current is {shown(have)!r}")  # fmt: skip


async def delete_queue(caller: Caller, name: str, body: Any) -> tuple[str, Any]:
    _no_body(body)
    caller.check("configure", name, "queue")
    queue = caller.vhost.queues.get(name)
    if queue is None:
        return OK, {"message_count": ULong(0)}  # deleting is idempotent, as in RabbitMQ
    _exclusive_access(caller, queue)
    return OK, {"message_count": ULong(await caller.vhost.delete_queue(name))}


async def purge_queue(caller: Caller, name: str, body: Any) -> tuple[str, Any]:
    _no_body(body)
    caller.check("read", name, "queue")
    queue = _queue(caller, name)
    _exclusive_access(caller, queue)
    check_internal(name, "purge")
    purged = queue.purge()  # a quorum queue answers once its log applied the purge
    return OK, {"message_count": ULong(await purged if inspect.isawaitable(purged) else purged)}


def _queue(caller: Caller, name: str) -> Any:
    queue = caller.vhost.queues.get(name)
    if queue is None:
        raise NotFound(f"queue '{name}' in vhost '{caller.vhost.name}' not found")
    return queue


def _exclusive_access(caller: Caller, queue: Any) -> None:
    if queue.exclusive_owner is not None and queue.exclusive_owner is not caller.owner:
        raise ResourceLocked(f"cannot obtain exclusive access to locked queue '{queue.name}' in vhost "
                             f"'{caller.vhost.name}'")  # fmt: skip


# ---------------------------------------------------------------- exchanges


async def put_token(caller: Caller, _: str, body: Any) -> tuple[str, Any]:
    """RabbitMQ 4's in-band token refresh (node/client/tokens.py)."""
    try:
        await caller.owner.refresh_token(body)
    except TokenRefused as e:
        raise ManagementError(f"token refused: {e}", UNAUTHORIZED) from None
    except ValueError as e:
        raise ManagementError(str(e)) from None
    return NO_CONTENT, None


async def put_exchange(caller: Caller, name: str, body: Any) -> tuple[str, Any]:
    props = _properties(body, "exchange", _EXCHANGE_FIELDS, _EXCHANGE_DEFAULTS)
    _not_default_exchange(name)
    vhost = caller.vhost
    caller.check("configure", name, "exchange")
    if vhost.routing.exchange(name) is None and name.startswith(RESERVED_PREFIX):
        raise Forbidden(f"exchange '{name}' in vhost '{vhost.name}' starts with reserved prefix '{RESERVED_PREFIX}'")
    # creates, or checks that the existing one is equivalent (409)
    await vhost.declare_exchange(name, props["type"], props["durable"], props["auto_delete"], props["internal"],
                           props["arguments"])  # fmt: skip
    return NO_CONTENT, None


async def delete_exchange(caller: Caller, name: str, body: Any) -> tuple[str, Any]:
    _no_body(body)
    _not_default_exchange(name)
    if name.startswith(RESERVED_PREFIX):
        raise Forbidden(f"exchange '{name}' in vhost '{caller.vhost.name}' starts with reserved prefix "
                        f"'{RESERVED_PREFIX}'")  # fmt: skip
    caller.check("configure", name, "exchange")
    await caller.vhost.delete_exchange(name)  # deleting an absent exchange is fine, as in RabbitMQ
    return NO_CONTENT, None


def _not_default_exchange(name: str) -> None:
    if name == "":
        raise Forbidden("operation not permitted on the default exchange")


# ---------------------------------------------------------------- bindings


@dataclass(frozen=True)
class _BindingSpec:
    source: str
    kind: str  # "queue" | "exchange"
    destination: str
    key: str


async def post_binding(caller: Caller, query: str, body: Any) -> tuple[str, Any]:
    fields = _properties(body, "binding", _BINDING_FIELDS, {"binding_key": "", "arguments": {}})
    if "source" not in fields:
        raise ManagementError("binding has no 'source'")
    destinations = [(k, fields[f"destination_{k}"]) for k in ("queue", "exchange") if f"destination_{k}" in fields]
    if len(destinations) != 1:
        raise ManagementError("binding needs one of 'destination_queue' and 'destination_exchange'")
    ((kind, destination),) = destinations
    spec = _BindingSpec(fields["source"], kind, destination, fields["binding_key"])
    _binding_checks(caller, spec)
    try:
        await caller.vhost.bind(spec.source, spec.kind, spec.destination, spec.key, fields["arguments"])
    except RoutingError as e:  # e.g. bad x-match: RabbitMQ answers 400 to any binding error
        if e.condition != Condition.PRECONDITION_FAILED:
            raise
        raise ManagementError(e.description or "invalid binding") from None
    return NO_CONTENT, None


async def delete_binding(caller: Caller, segment: str, body: Any) -> tuple[str, Any]:
    _no_body(body)
    spec, args_hash = _binding_segment(segment)
    _binding_checks(caller, spec)
    binding = _find_binding(caller, spec, args_hash)
    if binding is not None:
        await caller.vhost.unbind(spec.source, spec.kind, spec.destination, spec.key, dict(binding.arguments))
    return NO_CONTENT, None  # an absent binding is not an error, as in RabbitMQ


async def get_binding(caller: Caller, segment: str, body: Any) -> tuple[str, Any]:
    spec, args_hash = _binding_segment(segment)
    binding = _find_binding(caller, spec, args_hash)
    if binding is None:
        raise ManagementError(f"no binding {segment}", NOT_FOUND)
    return OK, binding_info(binding)


async def get_bindings(caller: Caller, query: str, body: Any) -> tuple[str, Any]:
    try:
        params = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query), errors="strict"))
    except (ValueError, UnicodeDecodeError):
        raise ManagementError(f"failed to dissect query '{query}'") from None
    if "src" not in params or "key" not in params:
        raise ManagementError(f"missing 'src' or 'key' in query: {query!r}")
    if "dste" in params:
        kind, destination = "exchange", params["dste"]
    elif "dstq" in params:
        kind, destination = "queue", params["dstq"]
    else:
        raise ManagementError(f"missing 'dste' or 'dstq' in query: {query!r}")
    bindings = caller.vhost.routing.list_bindings(source=params["src"], destination_kind=kind,
                                                  destination=destination, binding_key=params["key"])  # fmt: skip
    return OK, [binding_info(b) for b in bindings]


def binding_info(binding: Any) -> dict[str, Any]:
    return {
        "source": binding.source,
        f"destination_{binding.destination_kind}": binding.destination,
        "binding_key": binding.binding_key,
        "arguments": dict(binding.arguments),
        "location": binding_location(binding),
    }


def binding_location(binding: Any) -> str:
    """The path that names a binding, as RabbitMQ composes it."""
    q = quote_segment
    return (f"/bindings/src={q(binding.source)};dst{binding.destination_kind[0]}={q(binding.destination)};"
            f"key={q(binding.binding_key)};args={args_hash(binding.arguments)}")  # fmt: skip


def args_hash(arguments: Any) -> str:
    """Names a binding's arguments in its path: "" for none, else 4 bytes of
    a digest of their canonical form, URL-safe base64. RabbitMQ hashes with
    erlang:phash2; clients never compute it, they take `location` from
    GET /bindings."""
    if not arguments:
        return ""
    digest = hashlib.sha256(repr(_canonical(dict(arguments))).encode()).digest()[:4]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    return (type(value).__name__, value)


def _binding_segment(segment: str) -> tuple[_BindingSpec, str]:
    m = _BINDING_SEGMENT.match(segment)
    if m is None:
        raise ManagementError(f"bad binding path segment '{segment}'")
    src, kind, dst, key, hashed = m.groups()
    try:
        src, dst, key = (unquote(s, errors="strict") for s in (src, dst, key))
    except UnicodeDecodeError:
        raise ManagementError(f"bad binding path segment '{segment}'") from None
    return _BindingSpec(src, _KIND[kind], dst, key), hashed


def _find_binding(caller: Caller, spec: _BindingSpec, hashed: str) -> Any:
    for binding in caller.vhost.routing.list_bindings(source=spec.source, destination_kind=spec.kind,
                                                      destination=spec.destination, binding_key=spec.key):  # fmt: skip
        if args_hash(binding.arguments) == hashed:
            return binding
    return None


def _binding_checks(caller: Caller, spec: _BindingSpec) -> None:
    """RabbitMQ's binding_checks: never the default exchange, no line breaks,
    write on the destination and read on the source; then the exclusive
    queue of another connection is off limits."""
    if spec.source == "" or (spec.kind == "exchange" and spec.destination == ""):
        raise Forbidden("operation not permitted on the default exchange")
    _no_line_breaks(spec.source)
    _no_line_breaks(spec.destination)
    caller.check("write", spec.destination, spec.kind)
    caller.check("read", spec.source, "exchange")
    source = caller.vhost.routing.exchange(spec.source)
    if source is not None and str(source.type) == "topic":  # topic read on the binding key
        entries = caller.projections.topic_permissions
        grant = getattr(caller.owner, "grant", None)  # a token's topic scopes rule instead (OAuth 2)
        topic_permissions.check(entries, caller.user, caller.vhost.name, spec.source, spec.key, "read",
                                scopes=grant.scopes if grant is not None else None)  # fmt: skip
    if spec.kind == "queue":
        queue = caller.vhost.queues.get(spec.destination)
        if queue is not None:
            _exclusive_access(caller, queue)


__all__ = ["Caller", "ManagementError", "STATUS_BY_CONDITION", "handle"]
