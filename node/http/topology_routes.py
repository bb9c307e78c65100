"""Management API handlers for a vhost's topology: queues, exchanges and
bindings. Served by `node/http/api.py`, which authenticates and authorises
each request from the handler's @access level first; each change also needs
the AMQP permission the same operation would need (routing/permissions.py).

As in RabbitMQ: names are percent-encoded path segments ("/" is %2F), the
default exchange is "amq.default" in paths, a binding is named by source,
destination and properties key, and an AMQP refusal maps to 400
(precondition-failed, invalid-field, ...), 404 (not-found) or 401
(unauthorized-access). The vhost writes durable topology to the definitions
file before the answer.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from node.http import formats as fmt
from node.http.route_kit import (
    MGMT,
    USER,
    VHOST,
    access,
    api_of,
    bad_request,
    body_arguments,
    body_bool,
    check_permission,
    costly_list_response,
    created_or_updated,
    exchange_name,
    json_response,
    list_response,
    member_address,
    member_name,
    no_content,
    not_found,
    query_flag,
    read_body,
    refused,
    token_scopes,
)
from node.vhosts.remote_queue import refresh_counts
from routing import topic_permissions
from routing.delayed import check_internal
from routing.errors import PreconditionFailed
from routing.model import ALTERNATE_EXCHANGE

if TYPE_CHECKING:
    from node.http.api import ManagementAPI

# ---------------------------------------------------------------- queues


def _queue_json(api: ManagementAPI, queue: Any) -> dict:
    node = api.node
    out = fmt.queue_json(queue, node.config.node_name, lambda member: member_name(node, member),
                         api.queue_rates_of(queue), api.count_rates_of(queue))  # fmt: skip
    out["memory"] = node.memory.held_by(queue)
    worker = node.node_worker.worker_of(queue.vhost, queue.name) if node.node_worker is not None else None
    if worker is not None:  # a node of several workers: the one that runs the queue
        out["worker"] = worker
    return out


# Fields a queue listing sorts by without building each queue's JSON (costly_list_response).
_QUEUE_KEYS = {"name": lambda q: q.name, "vhost": lambda q: q.vhost, "type": lambda q: q.type_name}


async def _queue_list(request: web.Request, vhosts: list[Any]) -> web.Response:
    api = api_of(request)
    queues = [v.queues[name] for v in vhosts for name in sorted(v.queues)]
    # refresh_counts: the counts of those other nodes host, asked for the queues shown only
    return await costly_list_response(request, queues, _QUEUE_KEYS, lambda q: _queue_json(api, q), refresh_counts)


@access(MGMT)
async def list_queues(request: web.Request) -> web.Response:
    return await _queue_list(request, api_of(request).visible_vhosts(request[USER]))


@access(VHOST)
async def vhost_queues(request: web.Request) -> web.Response:
    return await _queue_list(request, [api_of(request).vhost(request.match_info["vhost"])])


@access(MGMT)
async def user_queues(request: web.Request) -> web.Response:
    """GET /api/users/{user}/queues (RabbitMQ's rabbit_mgmt_wm_user_queues):
    the queues the user declared, in the vhosts the asker may see; [] for a
    user who declared none, or whose queues were declared before the
    queue_declaring_user feature flag (their records name no user)."""
    api, user = api_of(request), request.match_info["user"]
    state = api.node.metadata.state
    queues = []
    for vhost in api.visible_vhosts(request[USER]):
        for name in sorted(vhost.queues):
            record = state.queue(vhost.name, name)
            if record is not None and record.user == user:
                queues.append(vhost.queues[name])
    await refresh_counts(queues)
    return list_response(request, [_queue_json(api, q) for q in queues])


def _queue(request: web.Request) -> tuple[Any, Any]:
    vhost = api_of(request).vhost(request.match_info["vhost"])
    queue = vhost.queues.get(request.match_info["name"])
    if queue is None:
        raise not_found()
    return vhost, queue


@access(VHOST)
async def get_queue(request: web.Request) -> web.Response:
    _, queue = _queue(request)
    await refresh_counts([queue])
    return json_response(request, _queue_json(api_of(request), queue))


@access(VHOST)
async def put_queue(request: web.Request) -> web.Response:
    """Declares a queue; redeclaring with other properties is 400 (RabbitMQ
    maps precondition-failed to bad_request in its HTTP API)."""
    api, name = api_of(request), request.match_info["name"]
    body = await read_body(request)
    vhost = api.vhost(request.match_info["vhost"])
    if body_bool(body, "exclusive", False):
        raise bad_request("exclusive queues cannot be declared over HTTP")
    durable, auto_delete = body_bool(body, "durable", True), body_bool(body, "auto_delete", False)
    arguments = body_arguments(body)
    if "type" in body and "x-queue-type" not in arguments:
        arguments["x-queue-type"] = body["type"]
    if "node" in body:
        _check_node(api, body["node"], vhost.with_default_type(durable, False, auto_delete, arguments))
    check_permission(request, vhost.name, "configure", name, "queue")
    queue, created = await vhost.declare_queue(name, durable, None, auto_delete, arguments, request[USER].name)
    if not created and hasattr(queue, "touch"):
        queue.touch()
    return created_or_updated(created)


def _check_node(api: Any, node: Any, arguments: dict) -> None:
    """RabbitMQ's "node" of a queue declaration: where a classic queue lives. Warren puts
    a classic queue on the node that serves the declaration, so that node is honoured
    and another refused; a quorum queue's or stream's members are placed by its leader
    locator (x-queue-leader-locator), which "node" would not change."""
    here = api.node.config.node_name
    if node != here and member_address(api.node, node) == node:  # no member of that name
        raise bad_request(f"Node {node} could not be contacted")  # RabbitMQ's words
    if node != here:
        raise bad_request(f"'node' {node!r}: a queue declared here lives on this node ({here}); "
                          "declare it through the API of the node it should live on")  # fmt: skip
    qtype = arguments.get("x-queue-type", "classic")
    if qtype != "classic":
        raise bad_request(f"'node' places a classic queue; a {qtype} queue's members are placed by "
                          "x-queue-leader-locator")  # fmt: skip


@access(VHOST)
async def delete_queue(request: web.Request) -> web.Response:
    vhost, queue = _queue(request)
    check_permission(request, vhost.name, "configure", queue.name, "queue")
    if query_flag(request, "if-unused") and queue.consumer_count:
        raise PreconditionFailed(f"queue '{queue.name}' in vhost '{vhost.name}' in use")
    if query_flag(request, "if-empty") and (queue.message_count or queue.unacked_count):
        raise PreconditionFailed(f"queue '{queue.name}' in vhost '{vhost.name}' not empty")
    await vhost.delete_queue(queue.name)
    return no_content()


@access(VHOST)
async def purge_queue(request: web.Request) -> web.Response:
    vhost, queue = _queue(request)
    check_permission(request, vhost.name, "read", queue.name, "queue")
    check_internal(queue.name, "purge")
    purged = queue.purge()
    if inspect.isawaitable(purged):  # a quorum queue: answer once the purge is applied
        await purged
    return no_content()


@access(VHOST)
async def queue_bindings(request: web.Request) -> web.Response:
    vhost, queue = _queue(request)
    bindings = [fmt.default_binding_json(vhost.name, queue.name)]
    bindings += [fmt.binding_json(vhost.name, b) for b in vhost.routing.list_bindings(destination_kind="queue",
                                                                                      destination=queue.name)]  # fmt: skip
    return json_response(request, bindings)


# ---------------------------------------------------------------- exchanges


def _exchanges(api: Any, vhosts: list[Any]) -> list[dict]:
    out = []
    for vhost in vhosts:
        out += sorted((api.exchange_json(vhost.name, x) for x in vhost.routing.exchanges()), key=lambda x: x["name"])
    return out


@access(MGMT)
async def list_exchanges(request: web.Request) -> web.Response:
    api = api_of(request)
    return list_response(request, _exchanges(api, api.visible_vhosts(request[USER])))


@access(VHOST)
async def vhost_exchanges(request: web.Request) -> web.Response:
    api = api_of(request)
    return list_response(request, _exchanges(api, [api.vhost(request.match_info["vhost"])]))


def _exchange(request: web.Request) -> tuple[Any, Any]:
    vhost = api_of(request).vhost(request.match_info["vhost"])
    exchange = vhost.routing.exchange(exchange_name(request.match_info["name"]))
    if exchange is None:
        raise not_found()
    return vhost, exchange


@access(VHOST)
async def get_exchange(request: web.Request) -> web.Response:
    vhost, exchange = _exchange(request)
    return json_response(request, api_of(request).exchange_json(vhost.name, exchange))


@access(VHOST)
async def put_exchange(request: web.Request) -> web.Response:
    api, name = api_of(request), exchange_name(request.match_info["name"])
    body = await read_body(request)
    vhost = api.vhost(request.match_info["vhost"])
    kind = body.get("type")
    if not isinstance(kind, str) or not kind:
        raise bad_request("'type' is mandatory (direct, fanout, topic, headers)")
    durable, auto_delete = body_bool(body, "durable", True), body_bool(body, "auto_delete", False)
    internal, arguments = body_bool(body, "internal", False), body_arguments(body)
    check_permission(request, vhost.name, "configure", name, "exchange")
    created = vhost.routing.exchange(name) is None
    alternate = arguments.get(ALTERNATE_EXCHANGE)
    if created and isinstance(alternate, str):
        # as RabbitMQ's exchange.declare (which its HTTP API goes through): a new exchange
        # naming an alternate needs read on itself and write on the alternate
        check_permission(request, vhost.name, "read", name, "exchange")
        check_permission(request, vhost.name, "write", alternate, "exchange")
    await vhost.declare_exchange(name, kind, durable, auto_delete, internal, arguments)
    return created_or_updated(created)


@access(VHOST)
async def delete_exchange(request: web.Request) -> web.Response:
    vhost, exchange = _exchange(request)
    check_permission(request, vhost.name, "configure", exchange.name, "exchange")
    if query_flag(request, "if-unused") and vhost.routing.list_bindings(source=exchange.name):
        raise PreconditionFailed(f"exchange '{exchange.name}' in vhost '{vhost.name}' in use")
    await vhost.delete_exchange(exchange.name)
    return no_content()


@access(VHOST)
async def exchange_bindings_source(request: web.Request) -> web.Response:
    vhost, exchange = _exchange(request)
    if exchange.name == "":
        return json_response(request, [fmt.default_binding_json(vhost.name, q) for q in sorted(vhost.queues)])
    return json_response(request, [fmt.binding_json(vhost.name, b)
                                   for b in vhost.routing.list_bindings(source=exchange.name)])  # fmt: skip


@access(VHOST)
async def exchange_bindings_destination(request: web.Request) -> web.Response:
    vhost, exchange = _exchange(request)
    bindings = vhost.routing.list_bindings(destination_kind="exchange", destination=exchange.name)
    return json_response(request, [fmt.binding_json(vhost.name, b) for b in bindings])


# ---------------------------------------------------------------- bindings

_KINDS = {"q": "queue", "e": "exchange"}


@access(MGMT)
async def list_bindings(request: web.Request) -> web.Response:
    vhosts = api_of(request).visible_vhosts(request[USER])
    return list_response(request, [b for v in vhosts for b in fmt.vhost_bindings(v)])


@access(VHOST)
async def vhost_bindings(request: web.Request) -> web.Response:
    return list_response(request, fmt.vhost_bindings(api_of(request).vhost(request.match_info["vhost"])))


def _binding_ends(request: web.Request) -> tuple[Any, str, str, str]:
    """(vhost, source, destination kind, destination) of a bindings path."""
    vhost = api_of(request).vhost(request.match_info["vhost"])
    source, kind = exchange_name(request.match_info["source"]), _KINDS[request.match_info["kind"]]
    destination = request.match_info["destination"]
    if vhost.routing.exchange(source) is None:
        raise not_found(f"no exchange '{source}' in vhost '{vhost.name}'")
    if kind == "queue" and destination not in vhost.queues:
        raise not_found(f"no queue '{destination}' in vhost '{vhost.name}'")
    if kind == "exchange" and vhost.routing.exchange(destination) is None:
        raise not_found(f"no exchange '{destination}' in vhost '{vhost.name}'")
    return vhost, source, kind, destination


def _between(vhost: Any, source: str, kind: str, destination: str) -> list[dict]:
    if source == "":
        return [fmt.default_binding_json(vhost.name, destination)] if kind == "queue" else []
    bindings = vhost.routing.list_bindings(source=source, destination_kind=kind, destination=destination)
    return [fmt.binding_json(vhost.name, b) for b in bindings]


@access(VHOST)
async def bindings_between(request: web.Request) -> web.Response:
    return json_response(request, _between(*_binding_ends(request)))


def _check_bind(request: web.Request, vhost: Any, source: str, kind: str, destination: str) -> None:
    check_permission(request, vhost.name, "write", destination, kind)
    check_permission(request, vhost.name, "read", source, "exchange")


def check_topic_read(request: web.Request, vhost: Any, source: str, key: str) -> None:
    """Binding to a topic exchange needs topic read access to the binding key."""
    x = vhost.routing.exchange(source)
    if x is not None and str(x.type) == "topic":
        entries = api_of(request).node.projections.topic_permissions
        topic_permissions.check(entries, request[USER].name, vhost.name, source, key, "read",
                                scopes=token_scopes(request[USER]))  # fmt: skip


@access(VHOST)
async def post_binding(request: web.Request) -> web.Response:
    """Creates a binding; 201 with its path in Location."""
    vhost, source, kind, destination = _binding_ends(request)
    body = await read_body(request)
    key = body.get("routing_key", "")
    if not isinstance(key, str):
        raise bad_request("'routing_key' must be a string")
    arguments = body_arguments(body)
    _check_bind(request, vhost, source, kind, destination)
    check_topic_read(request, vhost, source, key)
    await vhost.bind(source, kind, destination, key, arguments)
    m = request.match_info
    location = (f"/api/bindings/{quote(vhost.name, safe='')}/e/{quote(m['source'], safe='')}/{m['kind']}/"
                f"{quote(destination, safe='')}/{fmt.properties_key(key, arguments)}")  # fmt: skip
    return web.Response(status=201, headers={"Location": location})


def _one_binding(request: web.Request) -> tuple[Any, str, str, str, dict]:
    vhost, source, kind, destination = _binding_ends(request)
    wanted = request.match_info["props"]
    for b in _between(vhost, source, kind, destination):
        if b["properties_key"] == quote(wanted, safe="~") or b["properties_key"] == wanted:
            return vhost, source, kind, destination, b
    raise not_found()


@access(VHOST)
async def get_binding(request: web.Request) -> web.Response:
    return json_response(request, _one_binding(request)[4])


@access(VHOST)
async def delete_binding(request: web.Request) -> web.Response:
    vhost, source, kind, destination, binding = _one_binding(request)
    if source == "":
        raise refused("operation not permitted on the default exchange")
    _check_bind(request, vhost, source, kind, destination)
    await vhost.unbind(source, kind, destination, binding["routing_key"], binding["arguments"])
    return no_content()


# ---------------------------------------------------------------- routes

_Q = "/api/queues/{vhost}/{name}"
_X = "/api/exchanges/{vhost}/{name}"
_B = "/api/bindings/{vhost}/e/{source}/{kind:[eq]}/{destination}"

ROUTES = [
    ("GET", "/api/queues", list_queues),
    ("GET", "/api/users/{user}/queues", user_queues),
    ("GET", "/api/queues/{vhost}", vhost_queues),
    ("GET", _Q, get_queue),
    ("PUT", _Q, put_queue),
    ("DELETE", _Q, delete_queue),
    ("DELETE", _Q + "/contents", purge_queue),
    ("GET", _Q + "/bindings", queue_bindings),
    ("GET", "/api/exchanges", list_exchanges),
    ("GET", "/api/exchanges/{vhost}", vhost_exchanges),
    ("GET", _X, get_exchange),
    ("PUT", _X, put_exchange),
    ("DELETE", _X, delete_exchange),
    ("GET", _X + "/bindings/source", exchange_bindings_source),
    ("GET", _X + "/bindings/destination", exchange_bindings_destination),
    ("GET", "/api/bindings", list_bindings),
    ("GET", "/api/bindings/{vhost}", vhost_bindings),
    ("GET", _B, bindings_between),
    ("POST", _B, post_binding),
    ("GET", _B + "/{props}", get_binding),
    ("DELETE", _B + "/{props}", delete_binding),
]
