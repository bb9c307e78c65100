"""Management API handlers that touch messages and consumers, with
RabbitMQ's paths and JSON shapes:

    POST /api/exchanges/{vhost}/{name}/publish   {"routing_key", "payload", "payload_encoding",
                                                  "properties"} -> {"routed": bool}
    POST /api/queues/{vhost}/{name}/get          {"count", "ackmode", "encoding", "truncate"}
                                                  -> [{"payload", "properties", ...}, ...]
    GET  /api/consumers[/{vhost}]

Messages are AMQP 1.0 messages here. A publish builds one with a data
section and maps RabbitMQ's AMQP 0.9.1-style properties onto the header,
properties and application-properties sections (headers become
application-properties); a get maps them back. The payload of a get is the
data section's bytes, an amqp-value string's UTF-8, or else the encoded body
sections. A publish waits for every queue's confirm, as RabbitMQ's does.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any

from aiohttp import web

from amqp.message import Message
from amqp.types import Symbol, Timestamp
from node.http import formats as fmt
from node.http.client_views import connection_consumers
from node.http.route_kit import (
    MGMT,
    USER,
    VHOST,
    ApiError,
    access,
    api_of,
    bad_request,
    check_permission,
    exchange_name,
    json_response,
    not_found,
    read_body,
    refused,
    token_scopes,
)
from queues.base import ACCEPT, REJECT, RELEASE, Outcome, Queue, QueueMessage
from routing import topic_permissions
from routing.delayed import check_internal

DEFAULT_PRIORITY = 4  # of an AMQP 1.0 message without one [3.2.1]
GET_TIMEOUT = 5.0  # seconds a get waits for a queue on another node to answer
PUBLISH_TIMEOUT = 30.0  # seconds a publish waits for its queues' confirms
ACKMODES = {
    "ack_requeue_true": RELEASE,  # look, and leave the messages in the queue
    "reject_requeue_true": RELEASE,
    "ack_requeue_false": ACCEPT,  # take them
    "reject_requeue_false": REJECT,  # dead-letter (or drop) them
}

# ---------------------------------------------------------------- publish


def _payload(body: dict) -> bytes:
    payload, encoding = body.get("payload"), body.get("payload_encoding", "string")
    if not isinstance(payload, str):
        raise bad_request("'payload' must be a string")
    if encoding == "string":
        return payload.encode()
    if encoding == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request("'payload' is not valid base64") from None
    raise bad_request("'payload_encoding' must be string or base64")


def build_message(payload: bytes, props: dict) -> Message:
    """An AMQP 1.0 message from RabbitMQ's HTTP publish properties."""
    if not isinstance(props, dict):
        raise bad_request("'properties' must be a JSON object")
    # a header only when a field of it is given: a get then shows the delivery mode only
    # where the publish gave one, as RabbitMQ's properties of a message show what was set
    header: dict[str, Any] = {}
    if props.get("delivery_mode") is not None:
        header["durable"] = props["delivery_mode"] == 2
    if isinstance(props.get("priority"), int):
        header["priority"] = props["priority"]
    expiration = props.get("expiration")
    if expiration is not None:
        try:
            header["ttl"] = int(expiration)
        except (TypeError, ValueError):
            raise bad_request(f"'expiration' must be a number of milliseconds, got {expiration!r}") from None
    properties: dict[str, Any] = {}
    for key in ("message_id", "correlation_id", "reply_to"):
        if isinstance(props.get(key), str):
            properties[key] = props[key]
    for key in ("content_type", "content_encoding"):
        if isinstance(props.get(key), str):
            properties[key] = Symbol(props[key])
    if isinstance(props.get("user_id"), str):
        properties["user_id"] = props["user_id"].encode()
    if isinstance(props.get("timestamp"), int):
        properties["creation_time"] = Timestamp(props["timestamp"] * 1000)
    headers = props.get("headers") or {}
    if not isinstance(headers, dict):
        raise bad_request("'headers' must be a JSON object")
    if props.get("type") is not None:
        headers = {**headers, "x-basic-type": props["type"]}
    app_props = {str(k): v for k, v in headers.items() if v is None or isinstance(v, str | int | float | bool)}
    return Message.build(payload, header=header or None, properties=properties or None,
                         application_properties=app_props or None, body_kind="data")  # fmt: skip


async def _publish_to(queues: list[Queue], message: QueueMessage) -> list[Outcome]:
    loop = asyncio.get_running_loop()
    futures = []
    for q in queues:
        future = loop.create_future()
        futures.append(future)
        copy = QueueMessage(0, message.payload, message.durable, message.expires_at, 0, False, message.exchange,
                            list(message.routing_keys))  # fmt: skip
        q.publish(copy, lambda outcome, f=future: f.done() or f.set_result(outcome))
    return list(await asyncio.gather(*futures))


@access(VHOST)
async def publish(request: web.Request) -> web.Response:
    api = api_of(request)
    vhost = api.vhost(request.match_info["vhost"])
    name = exchange_name(request.match_info["name"])
    exchange = vhost.routing.exchange(name)
    if exchange is None:
        raise not_found()
    if exchange.internal:
        raise refused(f"cannot publish to internal exchange '{name}' in vhost '{vhost.name}'")
    body = await read_body(request)
    key = body.get("routing_key")
    if not isinstance(key, str):
        raise bad_request("'routing_key' must be a string")
    message = build_message(_payload(body), body.get("properties") or {})
    check_permission(request, vhost.name, "write", name, "exchange")
    if str(exchange.type) == "topic":
        entries = api.node.projections.topic_permissions
        topic_permissions.check(entries, request[USER].name, vhost.name, name, key, "write",
                                scopes=token_scopes(request[USER]))  # fmt: skip
    node = api.node
    if node.alarms.active:  # as an AMQP publisher is held; a queue on a full disk would keep it waiting
        alarms = ", ".join(f"{resource} on {member}" for member, resource in node.alarms.cluster_wide(node.config.node_name))
        raise ApiError(503, "service_unavailable", f"publishing is held by a resource alarm ({alarms})")
    node.metrics.published += 1
    queues = vhost.route(name, key, message)
    if not queues:
        node.metrics.unroutable += 1
        return json_response(request, {"routed": False})
    node.metrics.routed += 1
    ttl = message.ttl
    expires_at = node.now_ms() + ttl if ttl is not None else None
    sent = _publish_to(queues, QueueMessage(0, message.payload, message.durable, expires_at, 0, False, name, [key]))
    try:
        outcomes = await asyncio.wait_for(sent, PUBLISH_TIMEOUT)
    except TimeoutError:
        raise ApiError(503, "service_unavailable", "no confirm from the queues in time: the message may or may not "
                                                   "have been stored") from None  # fmt: skip
    if Outcome.UNKNOWN in outcomes:
        raise ApiError(503, "service_unavailable", "a queue's node was lost with the message in flight: it may or "
                                                   "may not have been stored")  # fmt: skip
    node.metrics.confirmed += 1
    if all(o is Outcome.NO_SPACE for o in outcomes):
        raise ApiError(503, "service_unavailable", "the disk of the queue's node is full (no space left on device)")
    if all(o in (Outcome.REJECTED, Outcome.NO_SPACE) for o in outcomes):
        raise bad_request("message rejected by every queue it was routed to (x-overflow reject-publish)")
    return json_response(request, {"routed": True})


# ---------------------------------------------------------------- get


class _Getter:
    """A consumer of one get: takes up to `count` messages, then stops."""

    presettled = False

    def __init__(self, count: int):
        self.count = count
        self.messages: list[QueueMessage] = []
        self.redelivered: list[bool] = []  # as delivered: a requeue marks the message acquired afterwards
        self.done = asyncio.get_running_loop().create_future()

    def deliver(self, queue: Queue, message: QueueMessage) -> None:
        self.messages.append(message)
        self.redelivered.append(message.acquired)
        if len(self.messages) >= self.count:
            self._finish()

    def credit_reply(self, delivery_count: int, credit: int, available: int, drain: bool) -> None:
        self._finish()  # the drain is complete: nothing more to take

    def queue_deleted(self) -> None:
        self._finish()

    def timed_out(self, description: str) -> None:
        self._finish()

    def queue_unavailable(self, description: str, condition: str = "") -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


def _get_options(body: dict) -> tuple[int, str, str, int | None]:
    count = body.get("count", 1)
    if isinstance(count, str) and count.isdigit():
        count = int(count)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise bad_request("'count' must be a positive integer")
    ackmode = body.get("ackmode")
    if ackmode not in ACKMODES:  # RabbitMQ 4's words (3.10 failed with a 500)
        raise bad_request(f"Invalid ackmode value: {ackmode}. Valid values are: ack_requeue_true, "
                          "ack_requeue_false, reject_requeue_true, reject_requeue_false")  # fmt: skip
    encoding = body.get("encoding", "auto")
    if encoding not in ("auto", "base64"):
        raise bad_request("'encoding' must be auto or base64")
    truncate = body.get("truncate")
    if truncate is not None:
        if isinstance(truncate, str) and truncate.isdigit():
            truncate = int(truncate)
        if isinstance(truncate, bool) or not isinstance(truncate, int) or truncate < 0:
            raise bad_request("'truncate' must be a non-negative integer")
    return count, ackmode, encoding, truncate


@access(VHOST)
async def get_messages(request: web.Request) -> web.Response:
    api = api_of(request)
    vhost = api.vhost(request.match_info["vhost"])
    queue = vhost.queues.get(request.match_info["name"])
    if queue is None:
        raise not_found()
    count, ackmode, encoding, truncate = _get_options(await read_body(request))
    check_permission(request, vhost.name, "read", queue.name, "queue")
    check_internal(queue.name, "get messages from")
    if queue.exclusive_owner is not None:
        raise bad_request(f"queue '{queue.name}' in vhost '{vhost.name}' is exclusive to another connection")
    getter = _Getter(count)
    queue.attach_consumer(getter, 0)
    try:
        queue.credit(getter, 0, count, True, False)
        try:
            await asyncio.wait_for(asyncio.shield(getter.done), GET_TIMEOUT)
        except TimeoutError:
            pass  # a queue on another node that did not answer: what came is the answer
        left = queue.message_count  # ready, with the taken ones out
        if getter.messages:
            queue.settle(getter, [m.seq for m in getter.messages], ACKMODES[ackmode])
    finally:
        queue.detach_consumer(getter)
    # as each basic.get would have said: how many were left behind this one
    n = len(getter.messages)
    return json_response(request, [message_json(msg, getter.redelivered[i], left + n - i - 1, encoding, truncate)
                                   for i, msg in enumerate(getter.messages)])  # fmt: skip


def message_json(msg: QueueMessage, redelivered: bool, message_count: int, encoding: str,
                 truncate: int | None) -> dict:  # fmt: skip
    parsed = Message.from_bytes(msg.payload)
    payload = _body_bytes(parsed)
    size = len(payload)
    if truncate is not None:
        payload = payload[:truncate]
    text = None
    if encoding == "auto":
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            pass
    return {
        "payload_bytes": size,
        "redelivered": redelivered,
        "exchange": msg.exchange,
        "routing_key": msg.routing_keys[0] if msg.routing_keys else "",
        "message_count": message_count,
        "properties": properties_json(parsed),
        "payload": text if text is not None else base64.b64encode(payload).decode(),
        "payload_encoding": "string" if text is not None else "base64",
    }


def _body_bytes(parsed: Message) -> bytes:
    body = parsed.body
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    return bytes(parsed.body_bytes)


def properties_json(parsed: Message) -> dict | list:
    """The message's properties under RabbitMQ's (AMQP 0.9.1) names: those it
    has, as RabbitMQ 4 converts an AMQP 1.0 message (mc_amqpl): the delivery mode
    where there is a header, the priority where it is not AMQP 1.0's default of 4
    (which the encoding leaves out, so a 4 given cannot be told from none). None
    at all is an empty JSON list, as RabbitMQ writes its empty property list."""
    out: dict[str, Any] = {}
    if parsed.header is not None:
        out["delivery_mode"] = 2 if parsed.durable else 1
        if parsed.priority != DEFAULT_PRIORITY:
            out["priority"] = parsed.priority
    if parsed.ttl is not None:
        out["expiration"] = str(parsed.ttl)
    for key in ("message_id", "correlation_id", "reply_to", "content_type"):
        value = getattr(parsed, key)
        if value is not None:
            out[key] = str(value)
    props = parsed.properties
    if props is not None and props.content_encoding is not None:
        out["content_encoding"] = str(props.content_encoding)
    if parsed.user_id is not None:
        out["user_id"] = bytes(parsed.user_id).decode(errors="replace")
    if parsed.creation_time is not None:
        out["timestamp"] = int(parsed.creation_time) // 1000
    headers = dict(parsed.application_properties or {})
    if "x-basic-type" in headers:
        out["type"] = headers.pop("x-basic-type")
    if headers:
        out["headers"] = fmt.plain(headers)
    return out or []


# ---------------------------------------------------------------- consumers


async def _consumers(request: web.Request, vhosts: set[str]) -> list[dict]:
    """The consumers in these vhosts, on every worker of the node."""
    node = api_of(request).node
    shown = connection_consumers(node.connections, vhosts, node.config.node_name)
    if node.node_worker is not None:
        shown += await node.node_worker.consumers(vhosts)
    return shown


@access(MGMT)
async def list_consumers(request: web.Request) -> web.Response:
    vhosts = {v.name for v in api_of(request).visible_vhosts(request[USER])}
    return json_response(request, await _consumers(request, vhosts))


@access(VHOST)
async def vhost_consumers(request: web.Request) -> web.Response:
    vhost = api_of(request).vhost(request.match_info["vhost"])
    return json_response(request, await _consumers(request, {vhost.name}))


ROUTES = [
    ("POST", "/api/exchanges/{vhost}/{name}/publish", publish),
    ("POST", "/api/queues/{vhost}/{name}/get", get_messages),
    ("GET", "/api/consumers", list_consumers),
    ("GET", "/api/consumers/{vhost}", vhost_consumers),
]
