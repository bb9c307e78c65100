"""Management API handlers for dynamic shovels, as RabbitMQ's
rabbitmq_shovel_management plugin:

    GET    /api/shovels[/{vhost}]                      every shovel's status, wherever it runs
    GET    /api/shovels/vhost/{vhost}/{name}           the shovel's parameter, its URIs without passwords
    DELETE /api/shovels/vhost/{vhost}/{name}           deletes the shovel (its parameter)
    DELETE /api/shovels/vhost/{vhost}/{name}/restart   restarts it where it runs

A status row: node, timestamp, name, vhost, type (dynamic), state
(starting, running, terminated), src_uri/dest_uri (no password),
src_protocol/dest_protocol, src_address or src_queue, dest_address or
dest_queue, forwarded (messages transferred), remaining (src-delete-after
left, or "unlimited") and reason (the last error). node/shovel/manager.py
gathers them from every reachable member.
"""

from __future__ import annotations

import json

from aiohttp import web

from metadata import commands as mc
from node.http.route_kit import (
    MGMT,
    USER,
    access,
    api_of,
    check_policymaker,
    json_response,
    member_name,
    no_content,
    not_found,
)
from node.shovel.definition import mask_uri
from node.vhosts.metadata_store import new_key


async def _status(request: web.Request, vhost: str | None) -> list[dict]:
    api = api_of(request)
    node = api.node
    visible = {v.name for v in api.visible_vhosts(request[USER])}
    rows = await node.shovels.status() if node.shovels is not None else []
    out = []
    for row in rows:
        if row["vhost"] in visible and (vhost is None or row["vhost"] == vhost):
            out.append({**row, "node": member_name(node, row["node"]) if row["node"] else ""})
    return out


@access(MGMT)
async def list_shovels(request: web.Request) -> web.Response:
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        api_of(request).vhost(vhost)
    return json_response(request, await _status(request, vhost))


def _parameter(request: web.Request) -> tuple[str, str, str]:
    vhost = api_of(request).vhost(request.match_info["vhost"]).name
    name = request.match_info["name"]
    value = api_of(request).node.projections.parameters.get((vhost, "shovel", name))
    if value is None:
        raise not_found(f"no shovel '{name}' in vhost '{vhost}'")
    return vhost, name, value


@access(MGMT)
async def get_shovel(request: web.Request) -> web.Response:
    vhost, name, value = _parameter(request)
    if not any(v.name == vhost for v in api_of(request).visible_vhosts(request[USER])):
        raise not_found()
    definition = json.loads(value)
    for key in ("src-uri", "dest-uri"):
        uris = definition.get(key)
        definition[key] = [mask_uri(u) for u in uris] if isinstance(uris, list) else mask_uri(uris)
    return json_response(request, {"vhost": vhost, "component": "shovel", "name": name, "value": definition})


@access(MGMT)
async def delete_shovel(request: web.Request) -> web.Response:
    check_policymaker(request)
    vhost, name, _ = _parameter(request)
    await api_of(request).node.metadata.run(mc.ClearParameter(new_key(), vhost, "shovel", name))
    return no_content()


@access(MGMT)
async def restart_shovel(request: web.Request) -> web.Response:
    check_policymaker(request)
    vhost, name, _ = _parameter(request)
    shovels = api_of(request).node.shovels
    if shovels is None or not await shovels.restart(vhost, name):
        raise not_found(f"shovel '{name}' in vhost '{vhost}' runs on no node now")
    return no_content()


ROUTES = [
    ("GET", "/api/shovels", list_shovels),
    ("GET", "/api/shovels/{vhost}", list_shovels),
    ("GET", "/api/shovels/vhost/{vhost}/{name}", get_shovel),
    ("DELETE", "/api/shovels/vhost/{vhost}/{name}", delete_shovel),
    ("DELETE", "/api/shovels/vhost/{vhost}/{name}/restart", restart_shovel),
]
