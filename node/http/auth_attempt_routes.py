"""GET and DELETE /api/auth/attempts/{node}[/source] (RabbitMQ's
rabbit_mgmt_wm_auth_attempts): the node's authentication attempts by
protocol, or by remote address, user name and protocol (recorded only with
track_auth_attempt_source on, as RabbitMQ's; else an empty list); DELETE
resets both, as RabbitMQ's reset_auth_attempt_metrics, the Prometheus
counters with them. GET needs monitoring, DELETE administrator. This node's
counts only: another member's name is 404 (RabbitMQ asks that node)."""

from __future__ import annotations

from aiohttp import web

from node.client.auth_attempts import AuthAttempts, Counts
from node.http.route_kit import ADMIN, MONITOR, access, api_of, json_response, no_content, not_found


def _attempts(request: web.Request) -> AuthAttempts:
    node = api_of(request).node
    if request.match_info["node"] != node.config.node_name:
        raise not_found()
    return node.logins.attempts


def _counts(counts: Counts) -> dict:
    return {"auth_attempts": counts.total, "auth_attempts_failed": counts.failed,
            "auth_attempts_succeeded": counts.succeeded}  # fmt: skip


@access(MONITOR)
async def by_protocol(request: web.Request) -> web.Response:
    attempts = _attempts(request)
    return json_response(request, [{"protocol": p, **_counts(c)} for p, c in attempts.by_protocol.items()])


@access(MONITOR)
async def by_source(request: web.Request) -> web.Response:
    attempts = _attempts(request)
    return json_response(request, [{"remote_address": address, "username": user, "protocol": protocol, **_counts(c)}
                                   for (address, user, protocol), c in attempts.by_source.items()])  # fmt: skip


@access(ADMIN)
async def reset(request: web.Request) -> web.Response:
    _attempts(request).reset()
    return no_content()


ROUTES = [
    ("GET", "/api/auth/attempts/{node}", by_protocol),
    ("DELETE", "/api/auth/attempts/{node}", reset),
    ("GET", "/api/auth/attempts/{node}/source", by_source),
    ("DELETE", "/api/auth/attempts/{node}/source", reset),
]
