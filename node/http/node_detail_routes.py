"""Management API handlers for the rest of RabbitMQ 4.2's read-mostly routes
about the node and its users:

    GET  /api/nodes/{node}/memory[/relative]   the memory breakdown (node/ops/memory.py) under
                                               RabbitMQ's category names; relative: percentages
    GET  /api/nodes/{node}/log-tail?lines=N    Warren's: the node's last N log lines (50; at most
                                               1000), `warren ctl log_tail` (node/ops/log_tail.py)
    GET  /api/extensions                       management UI extensions: [] (Warren has no UI)
    GET  /api/all-configuration                RabbitMQ's old name of /api/definitions (GET, POST)
    GET  /api/deprecated-features[/used]       []: Warren has none of RabbitMQ's deprecated features
    GET  /api/users/without-permissions        users with no permission in any vhost
    POST /api/users/bulk-delete                {"users": [...]}: deletes those that exist
    GET  /api/version                          the RabbitMQ version Warren answers as
    POST /api/vhosts/{vhost}/start/{node}      204: a vhost runs wherever its node runs
    GET  /api/auth/hash_password/{password}    {"ok": hash} in the node's password_hashing_module
    GET  /api/feature-flags                    RabbitMQ's path of /api/feature_flags
    PUT  /api/feature-flags/{name}/enable
    GET  /api/queues/detailed                  /api/queues (every field is already there)
"""

from __future__ import annotations

import asyncio

import psutil
from aiohttp import web

from metadata import commands as mc
from node.http import cluster_routes, node_routes, topology_routes
from node.http import formats as fmt
from node.http.route_kit import (
    ADMIN,
    MGMT,
    MONITOR,
    ApiError,
    access,
    api_of,
    bad_request,
    json_response,
    member_address,
    no_content,
    not_found,
    read_body,
)
from node.ops.log_tail import MAX_LINES
from node.vhosts.definitions import HASHING_ALGORITHM
from node.vhosts.metadata_store import new_key
from routing import rabbit_passwords

# Warren's memory parts (node/ops/memory.py MemoryAccount.breakdown), by RabbitMQ's category
_MEMORY_CATEGORIES = {"queue_procs": "classic_queues", "quorum_queue_procs": "quorum_queues",
                      "connection_other": "connections", "msg_index": "stores", "other_system": "baseline"}  # fmt: skip


@access(MONITOR)
async def node_memory(request: web.Request) -> web.Response:
    node = api_of(request).node
    if request.match_info["node"] != node.config.node_name:
        raise not_found()
    parts = node.memory.breakdown()
    held = sum(parts.values())
    memory: dict = {category: parts[part] for category, part in _MEMORY_CATEGORIES.items()}
    if request.path.rstrip("/").endswith("/relative"):
        memory = {k: round(v * 100 / held) if held else 0 for k, v in memory.items()}
        memory["total"] = 100
    else:
        memory["total"] = {"rss": psutil.Process().memory_info().rss, "allocated": held, "erlang": held}
    memory["strategy"] = "allocated"
    return json_response(request, {"memory": memory})


DEFAULT_TAIL_LINES = 50  # rabbitmq-diagnostics log_tail's default


@access(MONITOR)
async def node_log_tail(request: web.Request) -> web.Response:
    """The last lines of the node's log file, or of its console when it has no file."""
    node = api_of(request).node
    if request.match_info["node"] != node.config.node_name:
        raise not_found()
    raw = request.query.get("lines", str(DEFAULT_TAIL_LINES))
    try:
        lines = int(raw)
    except ValueError:
        raise bad_request(f"lines must be a whole number, got {raw!r}") from None
    if not 0 < lines <= MAX_LINES:
        raise bad_request(f"lines must be 1 to {MAX_LINES}, got {lines}")
    logs = node.logs
    source = logs.source if logs is not None else None
    if logs is None or source is None:
        raise not_found("the node has no log output to read: log_file and log_console are both off")
    tail = await asyncio.to_thread(logs.tail, lines)  # a file read: off the event loop
    return json_response(request, {"node": node.config.node_name, "source": source, "lines": tail})


@access(MGMT)
async def extensions(request: web.Request) -> web.Response:
    return json_response(request, [])


@access(MGMT)
async def deprecated_features(request: web.Request) -> web.Response:
    return json_response(request, [])


@access(MGMT)
async def version(request: web.Request) -> web.Response:
    return json_response(request, api_of(request).node.config.product_version)


@access(ADMIN)
async def users_without_permissions(request: web.Request) -> web.Response:
    auth = api_of(request).node.auth
    with_permissions = {user for user, _ in auth.permissions}
    users = sorted((u for u in auth.users.values() if u.name not in with_permissions), key=lambda u: u.name)
    return json_response(request, [fmt.user_json(u, HASHING_ALGORITHM) for u in users])


@access(ADMIN)
async def users_bulk_delete(request: web.Request) -> web.Response:
    node = api_of(request).node
    names = (await read_body(request)).get("users")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise bad_request("'users' must be a list of user names")
    for name in names:
        if name in node.auth.users:
            await node.metadata.run(mc.DeleteUser(new_key(), name))
    return no_content()


@access(ADMIN)
async def hash_password(request: web.Request) -> web.Response:
    """{"ok": hash}: the password hashed by the node's password_hashing_module, in the form
    PUT /api/users and definitions take as password_hash (RabbitMQ's base64 for its modules)."""
    stored = await api_of(request).node.logins.hash_password(request.match_info["password"])
    exported = rabbit_passwords.export(stored)
    return json_response(request, {"ok": exported[1] if exported is not None else stored})


@access(ADMIN)
async def start_vhost(request: web.Request) -> web.Response:
    """POST /api/vhosts/{vhost}/start/{node}: RabbitMQ restarts a vhost that failed on a
    node and answers 204 for one that runs. A Warren vhost runs on every member as long as
    the member does (its queues start as the metadata applies), so: 204 for a known node."""
    api = api_of(request)
    api.vhost(request.match_info["vhost"])  # 404 for an unknown vhost
    node, name = api.node, request.match_info["node"]
    member = member_address(node, name)
    known = [node.node_id] + (node.cluster.members() if node.cluster is not None else [])
    if member not in known:
        raise bad_request(f"Unknown node: {name}")
    return no_content()


@access(MGMT)
async def bulk_delete_not_get(request: web.Request) -> web.Response:
    """GET /api/users/bulk-delete: 405 as RabbitMQ's, not user 'bulk-delete'."""
    raise ApiError(405, "method_not_allowed", "GET not allowed here")


ROUTES = [
    ("GET", "/api/nodes/{node}/memory", node_memory),
    ("GET", "/api/nodes/{node}/memory/relative", node_memory),
    ("GET", "/api/nodes/{node}/log-tail", node_log_tail),
    ("GET", "/api/extensions", extensions),
    ("GET", "/api/all-configuration", node_routes.definitions),
    ("POST", "/api/all-configuration", node_routes.import_definitions),
    ("GET", "/api/deprecated-features", deprecated_features),
    ("GET", "/api/deprecated-features/used", deprecated_features),
    ("GET", "/api/users/without-permissions", users_without_permissions),
    ("POST", "/api/users/bulk-delete", users_bulk_delete),
    ("GET", "/api/users/bulk-delete", bulk_delete_not_get),
    ("GET", "/api/version", version),
    ("POST", "/api/vhosts/{vhost}/start/{node}", start_vhost),
    ("GET", "/api/auth/hash_password/{password}", hash_password),
    ("GET", "/api/feature-flags", cluster_routes.list_feature_flags),
    ("PUT", "/api/feature-flags/{name}/enable", cluster_routes.enable_feature_flag),
    ("GET", "/api/queues/detailed", topology_routes.list_queues),
]
