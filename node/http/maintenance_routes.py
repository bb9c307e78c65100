"""Management API handlers for maintenance mode and leader placement
(node/cluster/maintenance.py, node/cluster/placement.py).

    GET  /api/maintenance           this node's state: serving | draining | drained, the
                                    members it knows to be drained, its last drain's report
    POST /api/maintenance/drain     {"timeout": s}: drain this node (Warren's; RabbitMQ has
                                    only `rabbitmq-upgrade drain`); answers with the report
    POST /api/maintenance/revive    serve clients again
    POST /api/rebalance/queues      RabbitMQ's: even out quorum-queue leaders over the members;
                                    answers with one row per queue moved
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from node.http.route_kit import ADMIN, MONITOR, ApiError, access, api_of, bad_request, json_response, read_body

if TYPE_CHECKING:
    from node.http.management_node import ManagementNode

DRAIN_TIMEOUT = 30.0  # seconds a drain waits for the leaderships to move, unless told


def _node(request: web.Request) -> ManagementNode:
    node = api_of(request).node
    if node.cluster is None:
        raise ApiError(503, "cluster_unavailable", "the node is not running its cluster part yet")
    return node


@access(MONITOR)
async def maintenance_status(request: web.Request) -> web.Response:
    return json_response(request, _node(request).maintenance.status())


@access(ADMIN)
async def drain(request: web.Request) -> web.Response:
    body = await read_body(request)
    timeout = body.get("timeout", DRAIN_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise bad_request("'timeout' must be a number of seconds in (0, 600]")
    return json_response(request, await _node(request).maintenance.drain(float(timeout)))


@access(ADMIN)
async def revive(request: web.Request) -> web.Response:
    return json_response(request, await _node(request).maintenance.revive())


@access(ADMIN)
async def rebalance_queues(request: web.Request) -> web.Response:
    return json_response(request, await _node(request).placement.rebalance())


ROUTES = [
    ("GET", "/api/maintenance", maintenance_status),
    ("POST", "/api/maintenance/drain", drain),
    ("POST", "/api/maintenance/revive", revive),
    ("POST", "/api/rebalance/queues", rebalance_queues),
]
