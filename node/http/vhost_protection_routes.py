"""A vhost's protection from deletion (RabbitMQ 4.1,
rabbit_mgmt_wm_vhost_deletion_protection): POST
/api/vhosts/{vhost}/deletion/protection protects it, DELETE lifts it, for
administrators; while protected, DELETE /api/vhosts/{vhost} is refused with
412 precondition_failed (node_routes.py), by the metadata machine itself, so
every path to a deletion is (metadata/machine.py).

GET answers `{"name": ..., "protected_from_deletion": ...}`: RabbitMQ lists
GET among the route's methods but renders no body for it; the same fact is
the vhost's `protected_from_deletion` field in /api/vhosts.
"""

from __future__ import annotations

from aiohttp import web

from metadata import commands as mc
from node.http.route_kit import ADMIN, access, api_of, json_response, no_content
from node.vhosts.metadata_store import new_key

PATH = "/api/vhosts/{vhost}/deletion/protection"


@access(ADMIN)
async def get_protection(request: web.Request) -> web.Response:
    vhost = api_of(request).vhost(request.match_info["vhost"])
    return json_response(request, {"name": vhost.name, "protected_from_deletion": vhost.protected_from_deletion})


@access(ADMIN)
async def protect(request: web.Request) -> web.Response:
    return await _set(request, True)


@access(ADMIN)
async def unprotect(request: web.Request) -> web.Response:
    return await _set(request, False)


async def _set(request: web.Request, protected: bool) -> web.Response:
    api = api_of(request)
    vhost = api.vhost(request.match_info["vhost"])  # 404 for none, as RabbitMQ's resource_exists
    await api.node.metadata.run(mc.SetVHostDeletionProtection(new_key(), vhost.name, protected))
    return no_content()


ROUTES = [("GET", PATH, get_protection), ("POST", PATH, protect), ("DELETE", PATH, unprotect)]
