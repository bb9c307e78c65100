"""The management HTTP API on `config.http_port`: RabbitMQ's paths, JSON
shapes, status codes and authorisation rules for the common operations, on
the node's own event loop (aiohttp), so handlers read and change node state
directly, between two AMQP frames.

Authorisation follows RabbitMQ's management plugin
(rabbit_web_dispatch_access_control): HTTP basic auth against the node's
users; only users tagged administrator, monitoring, policymaker or
management may use the API; users and permissions need administrator;
nodes and other users' connections need monitoring; a vhost-scoped resource
needs administrator or a permission entry in that vhost; and declaring,
deleting, purging and binding also need the AMQP permission the operation
would need over AMQP (routing/permissions.py), for administrators too. A
refused request is 401 with error "not_authorised", as in RabbitMQ 4 (its
source carries "TODO: consider changing to 403"); a failed login is 401 with
error "not_authorized" and a WWW-Authenticate challenge.

Handlers are in the route modules that `ROUTES` lists, each with its table
of (method, path, handler): `node/http/node_routes.py` (node, connections,
vhosts, users, permissions), `node/http/cluster_routes.py` (the cluster),
`node/http/topology_routes.py` (queues, exchanges, bindings),
`node/http/policy_routes.py` (policies, operator policies),
`node/http/message_routes.py` (publish, get, consumers),
`node/http/topic_permission_routes.py` and the limits, TLS and maintenance
routes, the health checks (`node/http/health_routes.py`), runtime parameters, sessions and
channels, quorum replicas and the node's details (`parameter_routes.py`, `session_routes.py`,
`quorum_routes.py`, `node_detail_routes.py`), Warren's own routes for the console's Raft
and audit views (`raft_routes.py`, `audit_routes.py`), and the web console's page and files
(`console_routes.py`, no login: its data calls are API calls). They are built from `node/http/route_kit.py` (access levels, errors,
responses, request parsing), as this module's middleware is; JSON shapes are
in `node/http/formats.py`.
"""

from __future__ import annotations

import base64
import binascii
import logging
import ssl
from typing import TYPE_CHECKING, Any

from aiohttp import web

from node.client.login import LoginsBusy
from node.http import (
    audit_routes,
    auth_attempt_routes,
    cluster_routes,
    console_routes,
    health_routes,
    limit_routes,
    maintenance_routes,
    message_routes,
    node_detail_routes,
    node_routes,
    parameter_routes,
    policy_routes,
    quorum_routes,
    raft_routes,
    session_routes,
    shovel_routes,
    tls_routes,
    topic_permission_routes,
    topology_routes,
    vhost_protection_routes,
)
from node.http import formats as fmt
from node.http.route_kit import (
    ADMIN,
    API,
    MGMT,
    MONITOR,
    USER,
    VHOST,
    VHOST_VISIBLE,
    ApiError,
    Handler,
    error_response,
    is_admin,
    is_monitor,
    management_user,
    not_found,
    permission_of,
    refused,
    routing_error,
)
from node.ops.periodic import Periodic
from routing.errors import RoutingError
from routing.oauth import TokenRefused, TokenUser, UnknownKey

if TYPE_CHECKING:
    from node.http.management_node import ManagementNode

log = logging.getLogger("warren.http")

REALM = 'Basic realm="Warren Management"'
SAMPLE_INTERVAL = 5.0  # seconds between samples of the node counters for rates, as RabbitMQ
SHUTDOWN_TIMEOUT = 1.0  # seconds a stopping node waits for requests in flight

# Every route the API serves, by module, in the order they are matched.
ROUTES = [
    *node_detail_routes.ROUTES,  # first: /api/users/without-permissions is no user, /api/queues/detailed no vhost
    *vhost_protection_routes.ROUTES,
    *node_routes.ROUTES,
    *session_routes.ROUTES,
    *cluster_routes.ROUTES,  # /api/cluster
    *topology_routes.ROUTES,
    *limit_routes.ROUTES,
    *policy_routes.ROUTES,
    *parameter_routes.ROUTES,
    *shovel_routes.ROUTES,
    *message_routes.ROUTES,
    *topic_permission_routes.ROUTES,
    *tls_routes.ROUTES,
    *maintenance_routes.ROUTES,
    *health_routes.ROUTES,
    *quorum_routes.ROUTES,
    *auth_attempt_routes.ROUTES,
    *raft_routes.ROUTES,  # /api/raft/groups: every replicated group, for the console
    *audit_routes.ROUTES,  # /api/audit/timeline: this node's snapshots, for the console
    *console_routes.ROUTES,  # last: the web console's page and files, outside /api/
]

# ---------------------------------------------------------------- the API


class ManagementAPI:
    """Authentication, authorisation and errors around the handlers; owns the
    counter samples behind the rates in /api/overview and the queues' message_stats."""

    def __init__(self, node: ManagementNode):
        self.node = node
        self.rates = fmt.Rates()
        self.churn = fmt.Rates()  # of fmt.churn_counters
        self.queue_rates: dict[tuple[str, str], fmt.Rates] = {}  # by (vhost, queue): its message_stats rates
        self.exchange_rates: dict[tuple[str, str], fmt.Rates] = {}  # by (vhost, exchange): delayed exchanges'
        self.queue_counts: dict[tuple[str, str], fmt.Rates] = {}  # by (vhost, queue): its message counts
        self.vhost_counts: dict[str, fmt.Rates] = {}  # by vhost: the message counts of its queues
        self._timer: Periodic | None = None

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        for method, path, handler in ROUTES:
            app.router.add_route(method, path, handler)
            # RabbitMQ's router ignores one trailing slash, and clients' helpers
            # send it (DELETE /api/vhosts/v/): the same handler, no redirect
            if not path.endswith("/"):  # the console's "/" has no twin "//"
                app.router.add_route(method, path + "/", handler)
        app[API] = self
        return app

    def start_sampling(self) -> None:
        self._timer = Periodic(self.node.loop, SAMPLE_INTERVAL, self.sample, "sampling the message rates")
        self._timer.start()

    def sample(self) -> None:
        """Samples the node's and each queue's counters now (every SAMPLE_INTERVAL once sampling)."""
        self.rates.sample(fmt.message_counters(self.node.metrics))
        self.churn.sample(fmt.churn_counters(self.node))
        seen = set()
        for vhost in self.node.vhosts.values():
            for queue in vhost.queues.values():
                counters = fmt.queue_counters(queue)
                if counters is not None:
                    key = (vhost.name, queue.name)
                    seen.add(key)
                    self.queue_rates.setdefault(key, fmt.Rates()).sample(counters)
        for key in self.queue_rates.keys() - seen:  # deleted queues
            del self.queue_rates[key]
        exchanges = {(v.name, x) for v in self.node.vhosts.values() for x in v.routing.delayed_exchanges}
        for key in exchanges:
            self.exchange_rates.setdefault(key, fmt.Rates()).sample(fmt.exchange_counters(self.node.delayed.stats(*key)))
        for key in self.exchange_rates.keys() - exchanges:
            del self.exchange_rates[key]
        self._sample_counts()

    def _sample_counts(self) -> None:
        """Each queue's and vhost's message counts, for their `messages_details` rates."""
        queues, vhosts = {}, {}
        for vhost in self.node.vhosts.values():
            for queue in vhost.queues.values():
                queues[(vhost.name, queue.name)] = fmt.queue_counts(queue)
            vhosts[vhost.name] = fmt.vhost_counts(vhost)
        for samples, now in ((self.queue_counts, queues), (self.vhost_counts, vhosts)):
            for key in samples.keys() - now.keys():  # deleted
                del samples[key]
            for key, counts in now.items():
                samples.setdefault(key, fmt.Rates()).sample(counts)

    def queue_rates_of(self, queue: Any) -> dict[str, float] | None:
        """Per second, of the queue's counters since the older of its last two samples."""
        counters, rates = fmt.queue_counters(queue), self.queue_rates.get((queue.vhost, queue.name))
        return rates.rates(counters) if counters is not None and rates is not None else None

    def exchange_json(self, vhost: str, exchange: Any) -> dict:
        """An exchange's JSON; a delayed one's with its counts and their rates."""
        if str(exchange.type) != "x-delayed-message":
            return fmt.exchange_json(vhost, exchange)
        stats = self.node.delayed.stats(vhost, exchange.name)
        rates = self.exchange_rates.get((vhost, exchange.name))
        return fmt.exchange_json(vhost, exchange, stats, rates.rates(fmt.exchange_counters(stats)) if rates else None)
    def count_rates_of(self, queue: Any) -> dict[str, float] | None:
        """Per second, of the queue's message counts since the older of its last two samples."""
        samples = self.queue_counts.get((queue.vhost, queue.name))
        return samples.rates(fmt.queue_counts(queue), signed=True) if samples is not None else None

    def vhost_count_rates_of(self, vhost: Any) -> dict[str, float] | None:
        samples = self.vhost_counts.get(vhost.name)
        return samples.rates(fmt.vhost_counts(vhost), signed=True) if samples is not None else None

    def stop_sampling(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    # -- who is asking ---------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            level = getattr(request.match_info.handler, "access", None)
            if level is not None:  # None: no route matched; aiohttp answers 404 or 405 below
                user = await self._login(request)
                self._authorise(request, user, level)
                request[USER] = user
            return await handler(request)
        except ApiError as e:
            headers = {"WWW-Authenticate": REALM} if e.error == "not_authorized" else None
            return error_response(e.status, e.error, e.reason, headers)
        except RoutingError as e:
            err = routing_error(e)
            return error_response(err.status, err.error, err.reason)
        except web.HTTPException as e:
            if e.status == 404:
                return error_response(404, "Object Not Found", "Not Found")
            if e.status == 405:
                return error_response(405, "method_not_allowed", f"{request.method} not allowed here",
                                      {"Allow": e.headers.get("Allow", "")})  # fmt: skip
            raise
        except Exception as e:  # a bug of ours costs one request, never the node
            log.exception("internal error on %s %s", request.method, request.path)
            return error_response(500, "internal_server_error", f"{type(e).__name__}: {e}")

    async def _login(self, request: web.Request) -> Any:
        header = request.headers.get("Authorization", "")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and self.node.auth.tokens is not None:
            return await self._token_login(credentials.strip(), request.remote or "")
        if scheme.lower() != "basic":
            raise ApiError(401, "not_authorized", "Login failed")
        try:
            name, sep, password = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise ApiError(401, "not_authorized", "Login failed") from None
        if not sep:
            raise ApiError(401, "not_authorized", "Login failed")
        # The same check as SASL PLAIN (node/client/login.py), loopback-only
        # users and the delay after failures included; PBKDF2 runs in a worker
        # thread once per (user, password), then the Authenticator's cache answers.
        # A password that is an OAuth 2 token is checked as one, as over AMQP.
        peer = request.remote or ""
        try:
            ok, grant = await self.node.logins.login_grant("PLAIN", b"\0" + name.encode() + b"\0" + password.encode(),
                                                             peer, protocol="http")  # fmt: skip
        except LoginsBusy:
            raise ApiError(503, "service_unavailable", "too many logins in progress, try again later") from None
        if grant is not None:
            return management_user(TokenUser(grant.user, grant.tags, grant))
        user = self.node.auth.users.get(name) if ok is not None else None
        if user is None:
            log.info("HTTP access denied: login failed for user '%s' from %s", name, peer)
            raise ApiError(401, "not_authorized", "Login failed")
        return management_user(user)

    async def _token_login(self, token: str, peer: str) -> TokenUser:
        """`Authorization: Bearer <token>` (routing/oauth.py): the token's
        scopes are the request's permissions and its tag scopes its tags."""
        tokens = self.node.auth.tokens
        try:
            try:
                grant = tokens.verify(token)
            except UnknownKey:
                if not await self.node.logins.reload_token_keys():
                    raise
                grant = tokens.verify(token)
        except TokenRefused as e:
            log.info("HTTP access denied: token refused from %s: %s", peer, e)
            self.node.logins.delays.failed(peer)
            raise ApiError(401, "not_authorized", "Login failed") from None
        return management_user(TokenUser(grant.user, grant.tags, grant))

    def _authorise(self, request: web.Request, user: Any, level: str) -> None:
        if level == MGMT:
            return
        if level == ADMIN and not is_admin(user):
            raise refused("Not administrator user")
        if level == MONITOR and not is_monitor(user):
            raise refused("Not monitor user")
        if level in (VHOST, VHOST_VISIBLE):
            name = request.match_info.get("vhost")
            if name is None or name not in self.node.vhosts or is_admin(user):
                return  # a missing vhost is the handler's 404
            if level == VHOST_VISIBLE and is_monitor(user):
                return
            if permission_of(self.node, user, name) is None:
                raise refused("User not authorised to access virtual host")

    # -- what they may see -----------------------------------------------------

    def visible_vhosts(self, user: Any) -> list[Any]:
        """All vhosts for administrators and monitors; else those the user
        has permissions in (RabbitMQ's list_visible_vhosts)."""
        vhosts = sorted(self.node.vhosts.values(), key=lambda v: v.name)
        if is_monitor(user):
            return vhosts
        return [v for v in vhosts if permission_of(self.node, user, v.name) is not None]

    def vhost(self, name: str) -> Any:
        vhost = self.node.vhosts.get(name)
        if vhost is None:
            raise not_found(f"no vhost '{name}'")
        return vhost

    def listeners(self) -> list[dict]:
        """Each bound listener, named as RabbitMQ's /api/overview names them."""
        b, cfg = self.node, self.node.config
        bound = (("amqp", b.amqp_port), ("amqp/ssl", b.amqps_port), ("http", b.http_port), ("https", b.https_port),
                 ("http/prometheus", b.metrics_port), ("https/prometheus", b.metrics_tls_port))  # fmt: skip
        return [{"node": cfg.node_name, "protocol": protocol, "ip_address": cfg.listen_host, "port": port}
                for protocol, port in bound if port is not None]  # fmt: skip


# ---------------------------------------------------------------- listening


async def start_sites(app: web.Application, host: str,
                      listeners: list[tuple[int, ssl.SSLContext | None]]) -> tuple[web.AppRunner | None, list]:  # fmt: skip
    """Serves `app` on the running loop, once per (port, TLS context or None
    for plain HTTP) in `listeners`; a negative port is skipped. Returns the
    runner (None when nothing listens) and each listener's bound port (port 0
    picks a free one) or None."""
    wanted = [(port, tls) for port, tls in listeners if port >= 0]
    if not wanted:
        return None, [None] * len(listeners)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT)
    await runner.setup()
    bound = []
    try:
        for port, tls in listeners:
            if port < 0:
                bound.append(None)
                continue
            site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=tls)
            await site.start()
            bound.append(runner.addresses[-1][1])  # the socket this site just bound
    except BaseException:
        await runner.cleanup()
        raise
    return runner, bound
