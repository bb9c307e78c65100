"""Management API handlers for the node itself and its access control:
overview, nodes, definitions, connections, vhosts, users and
permissions. Served by `node/http/api.py`, which authenticates and
authorises each request from the handler's @access level first.

Answers follow RabbitMQ's HTTP API: PUT is 201 when it created something
and 204 when it changed or confirmed it, DELETE is 204, errors are
{"error": ..., "reason": ...}; users, permissions and vhosts are written to
the definitions file before the answer.
"""

from __future__ import annotations

import os
import resource
import shutil
from typing import TYPE_CHECKING, Any

import psutil
from aiohttp import web

from amqp.errors import Condition
from metadata import commands as mc
from node.http import formats as fmt
from node.http.route_kit import (
    ADMIN,
    MGMT,
    MONITOR,
    USER,
    VHOST,
    VHOST_VISIBLE,
    ApiError,
    access,
    api_of,
    bad_request,
    body_bool,
    created_or_updated,
    is_admin,
    is_monitor,
    json_response,
    list_response,
    no_content,
    not_found,
    read_body,
    refused,
)
from node.vhosts.definitions import HASHING_ALGORITHM, DefinitionsError, check_default_queue_type, vhost_command
from node.vhosts.metadata_store import MetadataRefused, new_key
from node.workers.scrape import scraped
from routing import permissions, rabbit_passwords
from routing.oauth import TokenUser

if TYPE_CHECKING:
    from node.http.api import ManagementAPI

DEFAULT_CLOSE_REASON = "Closed via management plugin"


# ---------------------------------------------------------------- node


@access(MGMT)
async def overview(request: web.Request) -> web.Response:
    api = api_of(request)
    node = await scraped(api.node)  # with several workers: every worker's counters and connections
    vhosts = api.visible_vhosts(request[USER])
    rates = api.rates.rates(fmt.message_counters(node.metrics))
    churn = api.churn.rates(fmt.churn_counters(node))
    counts: dict[str, float] = {}  # the visible vhosts' count rates, summed
    for vhost in vhosts:
        for key, rate in (api.vhost_count_rates_of(vhost) or {}).items():
            counts[key] = counts.get(key, 0.0) + rate
    return json_response(request, fmt.overview_json(node, vhosts, rates, api.listeners(), churn, counts))


@access(MGMT)
async def whoami(request: web.Request) -> web.Response:
    user = request[USER]
    return json_response(request, {"name": user.name, "tags": list(user.tags)})


async def _node(api: ManagementAPI) -> dict:
    node = await scraped(api.node)  # with several workers: every worker's memory, descriptors and sockets
    process = psutil.Process()
    try:
        fds = process.num_fds()
    except (AttributeError, psutil.Error):
        fds = 0
    total = getattr(node, "total", None)
    resources = {
        "os_pid": os.getpid(),
        "mem_used": node.alarms.memory_used,  # what the memory alarm compares (node/ops/memory.py)
        "mem_limit": node.alarms.memory_limit,
        "disk_free": shutil.disk_usage(node.config.data_dir).free,
        "fd_used": fds,
        "fd_total": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "processors": os.cpu_count() or 1,
    }
    shown = {}
    if total is not None:  # each worker's memory alarm watches its share: their sum is the node's
        resources.update(mem_used=total("memory_used"), mem_limit=total("memory_limit"), fd_used=total("fds"))
        shown["workers"] = node.workers_json()
    return {**fmt.node_json(node, node.started_at, resources), "listeners": api.listeners(),
            "contexts": fmt.contexts(node), **shown}  # fmt: skip


@access(MONITOR)
async def nodes(request: web.Request) -> web.Response:
    return json_response(request, [await _node(api_of(request))])


@access(MONITOR)
async def node(request: web.Request) -> web.Response:
    api = api_of(request)
    if request.match_info["node"] != api.node.config.node_name:
        raise not_found()
    return json_response(request, await _node(api))


@access(ADMIN)
async def definitions(request: web.Request) -> web.Response:
    return json_response(request, api_of(request).node.definitions.document())


@access(ADMIN)
async def vhost_definitions(request: web.Request) -> web.Response:
    api = api_of(request)
    vhost = api.vhost(request.match_info["vhost"]).name
    return json_response(request, api.node.definitions.document(vhost))


@access(ADMIN)
async def import_definitions(request: web.Request) -> web.Response:
    """POST /api/definitions[/{vhost}]: imports a document (RabbitMQ's
    export included) while the node runs; a malformed one is 400 and
    changes nothing."""
    api = api_of(request)
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        vhost = api.vhost(vhost).name
    doc = await read_body(request)
    try:
        await api.node.definitions.apply(doc, vhost)
    except DefinitionsError as e:
        raise bad_request(str(e)) from None
    return no_content()


@access(MGMT)
async def get_cluster_name(request: web.Request) -> web.Response:
    return json_response(request, {"name": fmt.cluster_name(api_of(request).node)})


@access(ADMIN)
async def put_cluster_name(request: web.Request) -> web.Response:
    """PUT /api/cluster-name {"name": ...}: the global parameter cluster_name,
    as RabbitMQ's set_cluster_name (what /api/overview and Prometheus report)."""
    name = (await read_body(request)).get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("'name' must be a non-empty string")
    await api_of(request).node.metadata.run(mc.SetGlobalParameter(new_key(), "cluster_name", name))
    return no_content()


# ---------------------------------------------------------------- connections


async def open_connections(api: ManagementAPI, user: Any, vhost: str | None = None) -> list[dict]:
    """Open connections (past AMQP OPEN), the user's own unless monitor (user None: all); on a
    node with several workers, every worker's, each naming its `worker`."""
    node = api.node
    shown = [fmt.connection_json(conn, node.config.node_name, node.alarms.active)
             for conn in node.connections if conn.vhost is not None]  # fmt: skip
    if node.node_worker is not None:
        shown = [c | {"worker": 0} for c in shown] + await node.node_worker.connections()
    out = [c for c in shown if (vhost is None or c["vhost"] == vhost) and (user is None or is_monitor(user) or c["user"] == user.name)]
    return sorted(out, key=lambda c: c["name"])


@access(MGMT)
async def list_connections(request: web.Request) -> web.Response:
    return list_response(request, await open_connections(api_of(request), request[USER]))


@access(VHOST)
async def vhost_connections(request: web.Request) -> web.Response:
    api = api_of(request)
    vhost = api.vhost(request.match_info["vhost"])
    return list_response(request, await open_connections(api, request[USER], vhost.name))


@access(MGMT)
async def get_connection(request: web.Request) -> web.Response:
    name, user = request.match_info["name"], request[USER]
    shown = next((c for c in await open_connections(api_of(request), None) if c["name"] == name), None)
    if shown is None:
        raise not_found(f"no connection '{name}'")
    if not is_monitor(user) and shown["user"] != user.name:
        raise refused("User not authorised to access object")
    return json_response(request, shown)


@access(MGMT)
async def close_connection(request: web.Request) -> web.Response:
    """Closes with amqp:connection:forced; the X-Reason header is the
    description, as in RabbitMQ."""
    name, user = request.match_info["name"], request[USER]
    shown = next((c for c in await open_connections(api_of(request), None) if c["name"] == name), None)
    if shown is None:
        raise not_found(f"no connection '{name}'")
    if not is_admin(user) and shown["user"] != user.name:
        raise refused("User not authorised to access object")
    if not await close_named(api_of(request), name, request.headers.get("X-Reason") or DEFAULT_CLOSE_REASON):
        raise not_found(f"no connection '{name}'")  # it closed meanwhile
    return no_content()


async def close_named(api: ManagementAPI, name: str, reason: str) -> bool:
    """Close the open connection `name` with amqp:connection:forced, on whichever worker
    holds it; False when none does."""
    local = next((c for c in api.node.connections if c.name == name and c.vhost is not None), None)
    if local is not None:
        local.force_close(Condition.CONNECTION_FORCED, reason)
        return True
    return api.node.node_worker is not None and await api.node.node_worker.close_connection(name, reason)


# ---------------------------------------------------------------- vhosts


@access(MGMT)
async def list_vhosts(request: web.Request) -> web.Response:
    api = api_of(request)
    node_name = api.node.config.node_name
    return list_response(request, [fmt.vhost_json(v, node_name, api.vhost_count_rates_of(v))
                                   for v in api.visible_vhosts(request[USER])])  # fmt: skip


@access(VHOST_VISIBLE)
async def get_vhost(request: web.Request) -> web.Response:
    api = api_of(request)
    vhost = api.vhost(request.match_info["vhost"])
    return json_response(request, fmt.vhost_json(vhost, api.node.config.node_name, api.vhost_count_rates_of(vhost)))


@access(ADMIN)
async def put_vhost(request: web.Request) -> web.Response:
    """Creates the vhost, or updates its description, tags and default queue
    type (each kept when the request does not mention it); the creating user
    gets full permissions in a new vhost (RabbitMQ's maybe_grant_full_permissions)."""
    api, name, user = api_of(request), request.match_info["vhost"], request[USER]
    body = await read_body(request)
    if not name:
        raise bad_request("vhost name must not be empty")
    try:
        tags = fmt.parse_tags(body.get("tags"))
    except ValueError as e:
        raise bad_request(str(e)) from None
    description = body.get("description", "")
    if not isinstance(description, str):
        raise bad_request("'description' must be a string")
    # RabbitMQ's firehose tracer is not built: tracing is refused, false accepted (also the
    # string "false" that rabbitmqadmin sends)
    if body_bool(body, "tracing", False):
        raise bad_request("tracing is not implemented by Warren")
    # RabbitMQ reads the older spelling defaultqueuetype when default_queue_type is absent
    field = "default_queue_type" if "default_queue_type" in body else "defaultqueuetype"
    queue_type = body.get(field)
    try:
        check_default_queue_type(queue_type, "" if field == "default_queue_type" else f"{field}: ")
    except DefinitionsError as e:
        raise bad_request(str(e)) from None
    node = api.node
    current = node.vhosts.get(name)
    created = current is None
    # RabbitMQ's PUT does not read it (its own route sets it): a vhost's own value, as a GET
    # shows it, is accepted back; another would be ignored there, so it is refused here
    protected = body.get("protected_from_deletion", current is not None and current.protected_from_deletion)
    if protected != (current is not None and current.protected_from_deletion):
        raise bad_request(f"protected_from_deletion is set by POST and DELETE /api/vhosts/{name}/deletion/protection")
    if not created:  # keep what the request does not mention
        description = description if "description" in body else current.description
        tags = tags if "tags" in body else list(current.tags)
    run = node.metadata.run
    await run(vhost_command(name, description, tags, queue_type))
    if created and not isinstance(user, TokenUser) and node.auth.permission(user.name, name) is None:
        await run(mc.SetPermissions(new_key(), user.name, name))
    return created_or_updated(created)


@access(ADMIN)
async def delete_vhost(request: web.Request) -> web.Response:
    """Deletes everything in it and disconnects its clients; a vhost protected
    from deletion is refused with 412, as RabbitMQ's (vhost_protection_routes.py)."""
    try:
        deleted = await api_of(request).node.delete_vhost(request.match_info["vhost"])
    except MetadataRefused as e:
        if e.condition != Condition.PRECONDITION_FAILED:
            raise
        raise ApiError(412, "precondition_failed", e.description) from None
    if not deleted:
        raise not_found()
    return no_content()


# ---------------------------------------------------------------- users and permissions


def _user(request: web.Request) -> Any:
    user = api_of(request).node.auth.users.get(request.match_info["user"])
    if user is None:
        raise not_found()
    return user


@access(ADMIN)
async def list_users(request: web.Request) -> web.Response:
    users = sorted(api_of(request).node.auth.users.values(), key=lambda u: u.name)
    return json_response(request, [fmt.user_json(u, HASHING_ALGORITHM) for u in users])


@access(ADMIN)
async def get_user(request: web.Request) -> web.Response:
    return json_response(request, fmt.user_json(_user(request), HASHING_ALGORITHM))


@access(ADMIN)
async def put_user(request: web.Request) -> web.Response:
    """Body: password or password_hash (Warren's PBKDF2 format) and tags (a
    comma-separated string or a list). Without either password field an
    existing user keeps its password and a new one has none (it cannot log
    in with a password)."""
    auth, name = api_of(request).node.auth, request.match_info["user"]
    body = await read_body(request)
    existing = auth.users.get(name)
    try:
        tags = fmt.parse_tags(body["tags"]) if "tags" in body else list(existing.tags if existing else [])
    except ValueError as e:
        raise bad_request(str(e)) from None
    password, password_hash = body.get("password"), body.get("password_hash")
    if password is not None:
        if not isinstance(password, str):
            raise bad_request("'password' must be a string")
        password_hash = await api_of(request).node.logins.hash_password(password)  # PBKDF2, off the loop
    elif password_hash is not None:
        algorithm = body.get("hashing_algorithm", HASHING_ALGORITHM)
        if algorithm in rabbit_passwords.ALGORITHMS and isinstance(password_hash, str):
            try:  # RabbitMQ's salted SHA-256/512, verified as it is until the first login
                password_hash = rabbit_passwords.stored_form(algorithm, password_hash)
            except ValueError as e:
                raise bad_request(str(e)) from None
        elif algorithm != HASHING_ALGORITHM or not isinstance(password_hash, str) or (
            password_hash and not password_hash.startswith("pbkdf2-sha256$")
        ):  # fmt: skip
            raise bad_request(f"password_hash must be in {HASHING_ALGORITHM} format")
    else:
        password_hash = existing.password_hash if existing else ""
    await api_of(request).node.metadata.run(mc.PutUser(new_key(), name, password_hash, tuple(tags)))
    return created_or_updated(existing is None)


@access(ADMIN)
async def delete_user(request: web.Request) -> web.Response:
    node, name = api_of(request).node, request.match_info["user"]
    if name not in node.auth.users:
        raise not_found()
    await node.metadata.run(mc.DeleteUser(new_key(), name))
    return no_content()


def _permissions(api: ManagementAPI, user: str | None = None, vhost: str | None = None) -> list[dict]:
    # by vhost, then user: RabbitMQ's default sort of a permissions listing
    items = sorted(api.node.auth.permissions.items(), key=lambda item: (item[0][1], item[0][0]))
    return [fmt.permission_json(u, v, p) for (u, v), p in items
            if (user is None or u == user) and (vhost is None or v == vhost)]  # fmt: skip


@access(ADMIN)
async def list_permissions(request: web.Request) -> web.Response:
    return json_response(request, _permissions(api_of(request)))


@access(ADMIN)
async def user_permissions(request: web.Request) -> web.Response:
    return json_response(request, _permissions(api_of(request), user=_user(request).name))


@access(ADMIN)
async def vhost_permissions(request: web.Request) -> web.Response:
    api = api_of(request)
    return json_response(request, _permissions(api, vhost=api.vhost(request.match_info["vhost"]).name))


@access(ADMIN)
async def get_permission(request: web.Request) -> web.Response:
    auth, user, vhost = api_of(request).node.auth, request.match_info["user"], request.match_info["vhost"]
    permission = auth.permission(user, vhost)
    if permission is None:
        raise not_found()
    return json_response(request, fmt.permission_json(user, vhost, permission))


@access(ADMIN)
async def put_permission(request: web.Request) -> web.Response:
    api, user, vhost = api_of(request), request.match_info["user"], request.match_info["vhost"]
    body = await read_body(request)
    if user not in api.node.auth.users:
        raise not_found(f"user_not_found: no user '{user}'")
    api.vhost(vhost)
    patterns = []
    for kind in ("configure", "write", "read"):
        pattern = body.get(kind)
        if not isinstance(pattern, str):
            raise bad_request(f"'{kind}' must be a string (a regular expression)")
        try:
            permissions.validate_pattern(pattern)
        except ValueError as e:
            raise bad_request(str(e)) from None
        patterns.append(pattern)
    created = api.node.auth.permission(user, vhost) is None
    await api.node.metadata.run(mc.SetPermissions(new_key(), user, vhost, *patterns))
    return created_or_updated(created)


@access(ADMIN)
async def delete_permission(request: web.Request) -> web.Response:
    node, user, vhost = api_of(request).node, request.match_info["user"], request.match_info["vhost"]
    if node.auth.permission(user, vhost) is None:
        raise not_found()
    await node.metadata.run(mc.ClearPermissions(new_key(), user, vhost))
    return no_content()


# ---------------------------------------------------------------- routes

ROUTES = [
    ("GET", "/api/overview", overview),
    ("GET", "/api/whoami", whoami),
    ("GET", "/api/nodes", nodes),
    ("GET", "/api/nodes/{node}", node),
    ("GET", "/api/definitions", definitions),
    ("POST", "/api/definitions", import_definitions),
    ("GET", "/api/definitions/{vhost}", vhost_definitions),
    ("POST", "/api/definitions/{vhost}", import_definitions),
    ("GET", "/api/cluster-name", get_cluster_name),
    ("PUT", "/api/cluster-name", put_cluster_name),
    ("GET", "/api/connections", list_connections),
    ("GET", "/api/connections/{name}", get_connection),
    ("DELETE", "/api/connections/{name}", close_connection),
    ("GET", "/api/vhosts", list_vhosts),
    ("GET", "/api/vhosts/{vhost}", get_vhost),
    ("PUT", "/api/vhosts/{vhost}", put_vhost),
    ("DELETE", "/api/vhosts/{vhost}", delete_vhost),
    ("GET", "/api/vhosts/{vhost}/permissions", vhost_permissions),
    ("GET", "/api/vhosts/{vhost}/connections", vhost_connections),
    ("GET", "/api/users", list_users),
    ("GET", "/api/users/{user}", get_user),
    ("PUT", "/api/users/{user}", put_user),
    ("DELETE", "/api/users/{user}", delete_user),
    ("GET", "/api/users/{user}/permissions", user_permissions),
    ("GET", "/api/permissions", list_permissions),
    ("GET", "/api/permissions/{vhost}/{user}", get_permission),
    ("PUT", "/api/permissions/{vhost}/{user}", put_permission),
    ("DELETE", "/api/permissions/{vhost}/{user}", delete_permission),
]
