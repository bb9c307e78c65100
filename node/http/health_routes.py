"""Management API health checks, as RabbitMQ 4.2's (rabbit_mgmt_wm_health_check_*):
each answers 200 {"status": "ok", ...} when the node passes and 503
{"status": "failed", "reason": ..., ...} when it does not; a malformed
argument (a port that is no number, an unknown time unit) is 400.

    GET /api/health/checks/alarms                       no resource alarm anywhere in the cluster
    GET /api/health/checks/local-alarms                 none on this node
    GET /api/health/checks/virtual-hosts                every vhost runs here
    GET /api/health/checks/port-listener/{port}         this node listens on the port
    GET /api/health/checks/protocol-listener/{protocols}  on each protocol (comma-separated)
    GET /api/health/checks/certificate-expiration/{within}/{unit}  no TLS listener's certificate
                                                        expires within N days|weeks|months|years
    GET /api/health/checks/node-is-quorum-critical      stopping this node leaves every quorum
                                                        queue a majority of online members
    GET /api/health/checks/is-in-service                not in maintenance (drained)
    GET /api/health/checks/below-node-connection-limit  fewer client connections than max_connections
    GET /api/health/checks/ready-to-serve-clients       in service, an AMQP listener, below the limit
    GET /api/health/checks/reached-target-cluster-size  every member known is online
    GET /api/health/checks/metadata-store/initialized[/with-data]  the metadata is caught up
                                                        (and holds a vhost)
    GET /api/health/checks/quorum-queues-without-elected-leaders/all-vhosts/[pattern/{pattern}]
    GET /api/health/checks/quorum-queues-without-elected-leaders/vhost/{vhost}/[pattern/{pattern}]
    GET /api/aliveness-test/{vhost}                     RabbitMQ's deprecated check: ok for a vhost
    GET /api/healthchecks/node[/{node}]                 RabbitMQ's deprecated check: ok for this node
"""

from __future__ import annotations

import datetime
import re
from typing import TYPE_CHECKING, Any

from aiohttp import web
from cryptography import x509

from node.http.route_kit import MGMT, VHOST, access, api_of, bad_request, json_response

if TYPE_CHECKING:
    from node.http.management_node import ManagementNode

# RabbitMQ's names for one protocol (rabbit_mgmt_wm_health_check_protocol_listener)
_PROTOCOL_ALIASES = {
    **dict.fromkeys(
        ("amqp091", "amqp0.9.1", "amqp0-9-1", "amqp0_9_1", "amqp10", "amqp1.0", "amqp1-0", "amqp1_0"), "amqp"
    ),
    "amqps": "amqp/ssl",
    **dict.fromkeys(("http", "management"), "http"),
    **dict.fromkeys(("https", "management/ssl"), "https"),
    "prometheus": "http/prometheus",
    **dict.fromkeys(("prometheus/ssl", "prometheus+tls"), "https/prometheus"),
}
_SECONDS = {"days": 86400, "weeks": 7 * 86400, "months": 30 * 86400, "years": 365 * 86400}
_DEFAULT_PATTERN = ".*"


def ok(request: web.Request, **fields: Any) -> web.Response:
    return json_response(request, {"status": "ok", **fields})


def failed(request: web.Request, reason: str, **fields: Any) -> web.Response:
    return json_response(request, {"status": "failed", "reason": reason, **fields}, status=503)


# ---------------------------------------------------------------- alarms


@access(MGMT)
async def alarms(request: web.Request) -> web.Response:
    """200 without alarms, 503 with, and 503 while this node's alarm check
    itself fails (then nobody knows)."""
    node = api_of(request).node
    check = node.alarm_check
    if check is not None and check.failing:
        return failed(request, f"the resource alarm check is failing ({check.failures} in a row): {check.last_error}")
    if request.path.rstrip("/").endswith("/local-alarms"):
        raised = [(node.config.node_name, name) for name in node.alarms.describe()]
    else:
        raised = [(node.config.node_name if member == node.node_id else member, name)
                  for member, name in node.alarms.cluster_wide(node.node_id)]  # fmt: skip
    if not raised:
        return ok(request)
    return failed(request, "resource alarm(s) in effect in the cluster",
                  alarms=[{"node": member, "resource": name} for member, name in raised])  # fmt: skip


# ---------------------------------------------------------------- listeners


@access(MGMT)
async def port_listener(request: web.Request) -> web.Response:
    raw = request.match_info["port"]
    if not re.fullmatch(r"-?[0-9]+", raw):
        raise bad_request("Invalid port")
    port = int(raw)
    ports = [x["port"] for x in api_of(request).listeners()]
    if port in ports:
        return ok(request, port=port)
    return failed(request, "No active listener", missing=port, ports=ports)


@access(MGMT)
async def protocol_listener(request: web.Request) -> web.Response:
    wanted = {_PROTOCOL_ALIASES.get(p.lower(), p.lower()) for p in request.match_info["protocols"].split(",")}
    active = sorted({x["protocol"] for x in api_of(request).listeners()})
    missing = sorted(wanted - set(active))
    if not missing:
        return ok(request, protocols=active)
    return failed(request, "No active listener", missing=missing, protocols=active)


@access(MGMT)
async def certificate_expiration(request: web.Request) -> web.Response:
    within, unit = request.match_info["within"], request.match_info["unit"].lower()
    if not re.fullmatch(r"-?[0-9]+", within):
        raise bad_request("Invalid expiration value.")
    if unit not in _SECONDS:
        raise bad_request("Time unit not recognised. Supported units: days, weeks, months, years.")
    api = api_of(request)
    cfg = api.node.config
    deadline = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=int(within) * _SECONDS[unit])
    cert_expiring, ca_expiring = _expiring(cfg.tls_cert, deadline), _expiring(cfg.tls_ca, deadline)
    expiring = []
    if cert_expiring or ca_expiring:  # every TLS listener serves the same files (node/client/tls.py)
        for listener in api.listeners():
            if listener["protocol"] in ("amqp/ssl", "https", "https/prometheus"):
                expiring.append({"node": listener["node"], "protocol": listener["protocol"],
                                 "interface": listener["ip_address"], "port": listener["port"],
                                 "certfile": cfg.tls_cert, "cacertfile": cfg.tls_ca,
                                 "certfile_expires_on": cert_expiring, "cacertfile_expires_on": ca_expiring})  # fmt: skip
    if not expiring:
        return ok(request)
    return failed(request, "Certificates expiring", expired=expiring)


def _expiring(path: str, deadline: datetime.datetime) -> list[str]:
    """When each certificate of a PEM file that expires by `deadline` does, as RabbitMQ lists them."""
    if not path:
        return []
    try:
        with open(path, "rb") as f:
            certificates = x509.load_pem_x509_certificates(f.read())
    except (OSError, ValueError):
        return []  # a file the TLS listeners could not load either: they are not running
    return [c.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ") for c in certificates
            if c.not_valid_after_utc <= deadline]  # fmt: skip


# ---------------------------------------------------------------- the node


@access(MGMT)
async def virtual_hosts(request: web.Request) -> web.Response:
    # a vhost is this node's routing table and queue processes: it runs once its metadata applied
    return ok(request)


@access(MGMT)
async def is_in_service(request: web.Request) -> web.Response:
    if api_of(request).node.maintenance.in_maintenance:
        return failed(request, "this rabbit node is not currently available to serve")
    return ok(request)


def _connection_count(node: ManagementNode) -> int:
    return sum(1 for conn in node.connections if conn.vhost is not None)


@access(MGMT)
async def below_node_connection_limit(request: web.Request) -> web.Response:
    node = api_of(request).node
    limit, count = node.config.max_connections, _connection_count(node)
    if limit and count >= limit:
        return failed(request, "node connection limit is reached")
    return ok(request)


@access(MGMT)
async def ready_to_serve_clients(request: web.Request) -> web.Response:
    api = api_of(request)
    node = api.node
    if node.maintenance.in_maintenance:
        return failed(request, "the rabbit node is not currently available to serve")
    if not any(x["protocol"] in ("amqp", "amqp/ssl") for x in api.listeners()):
        return failed(request, "no active listeners for AMQP/AMQPS")
    limit, count = node.config.max_connections, _connection_count(node)
    if limit and count >= limit:
        return failed(request, "node connection limit is reached", connections=count)
    return ok(request)


@access(MGMT)
async def reached_target_cluster_size(request: web.Request) -> web.Response:
    cluster = api_of(request).node.cluster
    online, target = cluster.reachability() if cluster is not None else (1, 1)
    if online >= target:
        return ok(request)
    return failed(request, f"target cluster size not reached: {online} of {target} nodes are online",
                  online=online, target=target)  # fmt: skip


@access(MGMT)
async def metadata_store_initialized(request: web.Request) -> web.Response:
    # the management API starts once the metadata has caught up (node/vhosts/metadata_ready.py)
    node = api_of(request).node
    if node.cluster is None:
        return failed(request, "Metadata store has not yet reported as initialized")
    if request.path.rstrip("/").endswith("/with-data") and not node.vhosts:
        return failed(request, "Metadata store has not yet been initialized: it reports to have no virtual hosts")
    return ok(request)


# ---------------------------------------------------------------- quorum queues


def _quorum_queues(node: ManagementNode, vhost: str | None = None) -> list[tuple[Any, dict]]:
    """(queue, its info) for each quorum queue, of `vhost` or all."""
    out = []
    for v in sorted(node.vhosts.values(), key=lambda v: v.name):
        if vhost is not None and v.name != vhost:
            continue
        for name in sorted(v.queues):
            queue = v.queues[name]
            if queue.type_name == "quorum":
                out.append((queue, queue.info()))
    return out


@access(MGMT)
async def node_is_quorum_critical(request: web.Request) -> web.Response:
    """Critical: some quorum queue on this node would lose its majority of
    online members if this node stopped."""
    node = api_of(request).node
    cluster = node.cluster
    if cluster is None or len(cluster.members()) <= 1:
        return ok(request, reason="single node cluster")
    critical = []
    for queue, info in _quorum_queues(node):
        members = list(info.get("members", ()))
        if node.node_id not in members:
            continue
        online_others = sum(1 for m in members if m != node.node_id and cluster.is_reachable(m))
        if online_others * 2 <= len(members):
            critical.append({"name": queue.name, "readable_name": f"queue '{queue.name}' in vhost '{queue.vhost}'",
                             "virtual_host": queue.vhost, "type": "quorum"})  # fmt: skip
    if not critical:
        return ok(request)
    return failed(request, "There are quorum queues that would lose their quorum if the target node is shut down",
                  queues=critical)  # fmt: skip


@access(MGMT)
async def quorum_queues_without_leaders(request: web.Request) -> web.Response:
    api = api_of(request)
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        api.vhost(vhost)  # 404 for an unknown vhost
    try:
        pattern = re.compile(request.match_info.get("pattern", _DEFAULT_PATTERN))
    except re.error as e:
        raise bad_request(f"invalid pattern: {e}") from None
    cluster = api.node.cluster
    leaderless = []
    for queue, info in _quorum_queues(api.node, vhost):
        if not pattern.search(queue.name):
            continue
        leader = info.get("leader")
        elected = info.get("leader_elected", True) and leader is not None
        if not elected or (cluster is not None and not cluster.is_reachable(leader)):
            leaderless.append({"name": queue.name, "virtual_host": queue.vhost, "type": "quorum"})
    if not leaderless:
        return ok(request)
    return failed(request, "Detected quorum queues without an elected leader", queues=leaderless)


@access(MGMT)
async def node_health(request: web.Request) -> web.Response:
    """RabbitMQ's deprecated node health check: ok for a running node."""
    node = api_of(request).node
    name = request.match_info.get("node", node.config.node_name)
    if name not in (node.config.node_name, node.node_id):
        return failed(request, f"nodedown: {name} is not this node")
    return ok(request)


@access(VHOST)
async def aliveness_test(request: web.Request) -> web.Response:
    api_of(request).vhost(request.match_info["vhost"])
    return ok(request)


_C = "/api/health/checks"
_QL = f"{_C}/quorum-queues-without-elected-leaders"
ROUTES = [
    ("GET", f"{_C}/alarms", alarms),
    ("GET", f"{_C}/local-alarms", alarms),
    ("GET", f"{_C}/virtual-hosts", virtual_hosts),
    ("GET", f"{_C}/port-listener/{{port}}", port_listener),
    ("GET", f"{_C}/protocol-listener/{{protocols}}", protocol_listener),
    ("GET", f"{_C}/certificate-expiration/{{within}}/{{unit}}", certificate_expiration),
    ("GET", f"{_C}/node-is-quorum-critical", node_is_quorum_critical),
    ("GET", f"{_C}/is-in-service", is_in_service),
    ("GET", f"{_C}/below-node-connection-limit", below_node_connection_limit),
    ("GET", f"{_C}/ready-to-serve-clients", ready_to_serve_clients),
    ("GET", f"{_C}/reached-target-cluster-size", reached_target_cluster_size),
    ("GET", f"{_C}/metadata-store/initialized", metadata_store_initialized),
    ("GET", f"{_C}/metadata-store/initialized/with-data", metadata_store_initialized),
    ("GET", f"{_QL}/all-vhosts", quorum_queues_without_leaders),
    ("GET", f"{_QL}/all-vhosts/pattern/{{pattern}}", quorum_queues_without_leaders),
    ("GET", f"{_QL}/vhost/{{vhost}}", quorum_queues_without_leaders),
    ("GET", f"{_QL}/vhost/{{vhost}}/pattern/{{pattern}}", quorum_queues_without_leaders),
    ("GET", "/api/aliveness-test/{vhost}", aliveness_test),
    ("GET", "/api/healthchecks/node", node_health),
    ("GET", "/api/healthchecks/node/{node}", node_health),
]
