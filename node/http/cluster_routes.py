"""Management API handlers for the cluster (node/cluster/cluster.py).

    GET  /api/cluster                   this node's view: role, term, leader, indexes, members, failed,
                                        raft_log_out_of_space (a log write waits for disk space)
    POST /api/cluster/join              {"seed": "host:port"}: reset this node, join seed's cluster
    POST /api/cluster/forget            {"node": "host:port"}: remove a (stopped) member, and its replicas

    GET  /api/feature_flags             every flag this node knows: name, desc, stability,
                                        introduced_in, state (enabled | disabled | unavailable,
                                        with unsupported_by naming the members lacking it)
    PUT  /api/feature_flags/{name}/enable   enable it (its dependencies first); name "all":
                                        every stable flag that every member supports. The
                                        metadata machine refuses (409) while a member lacks it.

Test-only, answered 404 unless the node runs with --enable-test-faults:

    POST /api/cluster/test/partition    {"peers": [...]} (default: every other member),
                                        "outbound_only": true cuts only this node's streams to them
    POST /api/cluster/test/heal         {"peers": [...]} (default: all)
    POST /api/cluster/test/delay        {"ms": D, "jitter_ms": J}: every frame this node sends to a
                                        peer waits D +- J ms, in order (netem's delay); ms 0 ends it
    PUT  /api/cluster/test/kv/{key}     {"value", "idempotency_key", "timeout"}: commit a Put
    GET  /api/cluster/test/kv/{key}     ?consistent=true fences first; 404 for a missing key
    GET  /api/cluster/test/kv           every key
    POST /api/cluster/test/alarm        {"resource": "memory", "on": true}: raise or clear a forced alarm
    GET  /api/cluster/test/disk_fault   the armed disk faults and how many fired, per store
    POST /api/cluster/test/disk_fault   {"store": "raft" | "stream" | "messages", "op": "write" | "fsync",
                                        "error": "ENOSPC" | "EDQUOT" | "EIO", "count": N}: the store's
                                        next N writes (or fsyncs) fail with that error; "count": null
                                        fails every one until cleared (storage/faults.py)
    DELETE /api/cluster/test/disk_fault ?store=S: disarm S's faults (default every store's)

A command that cannot commit in time answers 503 with error "no_quorum"
("cluster has no majority: 1 of 3 members reachable": it was not applied) or
"cluster_unavailable" (a majority is reachable but nothing committed in time,
or the command was in flight when it was cut off and "may still be applied").
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from metadata.commands import EnableFeatureFlag
from metadata.feature_flags import FLAGS, STABLE
from node.cluster.cluster import Cluster, ClusterError, ClusterUnavailable, MembershipError, NoQuorum
from node.cluster.kv import KeyValueMachine, Put
from node.cluster.machine import ClusterMachine
from node.http.route_kit import (
    ADMIN,
    MONITOR,
    ApiError,
    access,
    api_of,
    bad_request,
    json_response,
    not_found,
    query_flag,
    read_body,
)
from node.ops import snapshot_export
from node.vhosts.replica_shrink import shrink_all
from storage.faults import STORES, DiskFaults


def _cluster(request: web.Request) -> Cluster:
    cluster = api_of(request).node.cluster
    if cluster is None:
        raise ApiError(404, "Object Not Found", "clustering is off on this node (grpc_port < 0)")
    return cluster


def _test_cluster(request: web.Request) -> Cluster:
    if not api_of(request).node.config.enable_test_faults:
        raise not_found()
    return _cluster(request)


def _cluster_error(e: ClusterError) -> ApiError:
    if isinstance(e, NoQuorum):
        return ApiError(503, "no_quorum", str(e))
    if isinstance(e, ClusterUnavailable):
        return ApiError(503, "cluster_unavailable", str(e))
    if isinstance(e, MembershipError):
        return ApiError(e.status, "bad_request" if e.status == 400 else "cluster_membership", str(e))
    return ApiError(503, "cluster_error", str(e))


def _timeout(body: dict, request: web.Request) -> float | None:
    raw = body.get("timeout", request.query.get("timeout"))
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise bad_request("'timeout' must be a number of seconds") from None
    if not 0 < value <= 300:
        raise bad_request("'timeout' must be in (0, 300] seconds")
    return value


def _string(body: dict, key: str, required: bool = True) -> str:
    value = body.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value):
        raise bad_request(f"'{key}' must be a {'non-empty ' if required else ''}string")
    return value


def _peers(body: dict) -> list[str] | None:
    peers = body.get("peers")
    if peers is not None and (not isinstance(peers, list) or not all(isinstance(p, str) for p in peers)):
        raise bad_request("'peers' must be a list of cluster addresses")
    return peers


# ---------------------------------------------------------------- status and membership


@access(MONITOR)
async def cluster_status(request: web.Request) -> web.Response:
    api = api_of(request)
    status = _cluster(request).status()
    status["node_name"] = api.node.config.node_name
    return json_response(request, status)


@access(ADMIN)
async def join_cluster(request: web.Request) -> web.Response:
    body = await read_body(request)
    try:
        status = await _cluster(request).join_cluster(_string(body, "seed"), _timeout(body, request) or 25.0)
    except ClusterError as e:
        raise _cluster_error(e) from None
    return json_response(request, status)


@access(ADMIN)
async def forget_cluster_node(request: web.Request) -> web.Response:
    """The member goes, then its replicas of every quorum queue and stream (replica_shrink.py):
    `queues_shrunk` lists each queue with the members left or why it kept the replica."""
    body = await read_body(request)
    member = _string(body, "node")
    try:
        status = await _cluster(request).forget_cluster_node(member, _timeout(body, request))
    except ClusterError as e:
        raise _cluster_error(e) from None
    node = api_of(request).node
    shrunk = await shrink_all(node.quorum, node.metadata.state, member.strip())
    return json_response(request, {**status, "queues_shrunk": shrunk})


# ---------------------------------------------------------------- test faults and the key-value probe


@access(ADMIN)
async def partition(request: web.Request) -> web.Response:
    cluster = _test_cluster(request)
    body = await read_body(request)
    cut = cluster.partition(_peers(body), inbound=not body.get("outbound_only", False))
    return json_response(request, {"partitioned": cut})


@access(ADMIN)
async def heal(request: web.Request) -> web.Response:
    cluster = _test_cluster(request)
    cluster.heal(_peers(await read_body(request)))
    return json_response(request, {"partitioned": sorted(cluster.transport.partitioned)})


@access(ADMIN)
async def delay(request: web.Request) -> web.Response:
    cluster = _test_cluster(request)
    body = await read_body(request)
    ms, jitter = body.get("ms", 0), body.get("jitter_ms", 0)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (ms, jitter)):
        raise bad_request("'ms' and 'jitter_ms' must be numbers")
    try:
        cluster.transport.delay(ms / 1000, jitter / 1000)
    except ValueError as e:
        raise bad_request(str(e)) from None
    return json_response(request, {"ms": ms, "jitter_ms": jitter})


def _kv(cluster: Cluster) -> KeyValueMachine:
    machine = cluster.machine.kv if isinstance(cluster.machine, ClusterMachine) else cluster.machine
    if not isinstance(machine, KeyValueMachine):
        raise not_found("this node's machine is not the key-value probe")
    return machine


@access(ADMIN)
async def put_kv(request: web.Request) -> web.Response:
    cluster = _test_cluster(request)
    _kv(cluster)
    body = await read_body(request)
    record = Put(request.match_info["key"], _string(body, "value", required=False),
                 _string(body, "idempotency_key", required=False))  # fmt: skip
    try:
        version = await cluster.propose(record, _timeout(body, request))
    except ClusterError as e:
        raise _cluster_error(e) from None
    return json_response(request, {"key": record.key, "version": version, "node": cluster.node_id})


def _kv_json(key: str, item: tuple[str, int]) -> dict[str, Any]:
    return {"key": key, "value": item[0], "version": item[1]}


@access(MONITOR)
async def get_kv(request: web.Request) -> web.Response:
    cluster = _test_cluster(request)
    kv = _kv(cluster)
    key = request.match_info["key"]
    if query_flag(request, "consistent"):
        try:
            await cluster.fence(_timeout({}, request))
        except ClusterError as e:
            raise _cluster_error(e) from None
    item = kv.get(key)
    if item is None:
        raise not_found(f"no key {key!r}")
    return json_response(request, _kv_json(key, item))


@access(MONITOR)
async def list_kv(request: web.Request) -> web.Response:
    kv = _kv(_test_cluster(request))
    return json_response(request, [_kv_json(k, v) for k, v in sorted(kv.data.items())])


@access(ADMIN)
async def force_alarm(request: web.Request) -> web.Response:
    _test_cluster(request)
    body = await read_body(request)
    on = body.get("on", True)
    if not isinstance(on, bool):
        raise bad_request("'on' must be true or false")
    node = api_of(request).node
    worker = body.get("worker", 0)  # on a node of several workers: that worker's own alarm
    if not isinstance(worker, int) or isinstance(worker, bool) or worker < 0 or worker >= node.config.workers:
        raise bad_request(f"'worker' must be one of this node's workers, 0 to {node.config.workers - 1}")
    if worker > 0:
        answers = await node.node_worker.gathered(["force_alarm", worker, _string(body, "resource"), on])
        if not answers:
            raise bad_request(f"worker {worker} did not answer")
        return json_response(request, {"alarms": answers[0]})
    node.alarms.force(_string(body, "resource"), on)
    return json_response(request, {"alarms": node.alarms.describe()})


def _disk_faults(request: web.Request) -> DiskFaults:
    _test_cluster(request)
    faults = api_of(request).node.disk_faults
    if faults is None:
        raise not_found()
    return faults


@access(MONITOR)
async def get_disk_faults(request: web.Request) -> web.Response:
    return json_response(request, _disk_faults(request).describe())


@access(ADMIN)
async def arm_disk_fault(request: web.Request) -> web.Response:
    faults = _disk_faults(request)
    body = await read_body(request)
    count = body.get("count", 1)
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise bad_request("'count' must be a whole number of at least 1, or null (until cleared)")
    try:
        faults.arm(_string(body, "store"), body.get("op", "write"), body.get("error", "ENOSPC"), count)
    except (ValueError, TypeError) as e:
        raise bad_request(str(e)) from None
    return json_response(request, faults.describe())


@access(ADMIN)
async def clear_disk_faults(request: web.Request) -> web.Response:
    faults = _disk_faults(request)
    store = request.query.get("store")
    if store is not None and store not in STORES:
        raise bad_request(f"unknown store {store!r}: one of {', '.join(STORES)}")
    faults.clear(store)
    return json_response(request, faults.describe())


# ---------------------------------------------------------------- quorum queue members


async def _members_change(request: web.Request, vhost: str, name: str, node: str, add: bool) -> list[str]:
    quorum = api_of(request).node.quorum
    try:
        return await quorum.change_member(vhost, name, node, add)
    except ClusterError as e:
        raise _cluster_error(e) from None


@access(ADMIN)
async def add_queue_member(request: web.Request) -> web.Response:
    """POST /api/quorum-queues/{vhost}/{name}/members {"node": ID}: rabbitmq-queues add_member."""
    body = await read_body(request)
    members = await _members_change(request, request.match_info["vhost"], request.match_info["name"],
                                    _string(body, "node"), True)  # fmt: skip
    return json_response(request, {"members": members})


@access(ADMIN)
async def delete_queue_member(request: web.Request) -> web.Response:
    """DELETE /api/quorum-queues/{vhost}/{name}/members/{node}: rabbitmq-queues delete_member."""
    members = await _members_change(request, request.match_info["vhost"], request.match_info["name"],
                                    request.match_info["node"], False)  # fmt: skip
    return json_response(request, {"members": members})


@access(ADMIN)
async def grow_or_shrink(request: web.Request) -> web.Response:
    """POST /api/quorum-queues/grow|shrink {"node": ID}: add the node to (remove it from) every quorum queue."""
    body = await read_body(request)
    quorum = api_of(request).node.quorum
    node = _string(body, "node")
    results = await (quorum.grow(node) if request.match_info["op"] == "grow" else quorum.shrink(node))
    return json_response(request, results)


# ---------------------------------------------------------------- cluster-state snapshots


@access(ADMIN)
async def list_snapshots(request: web.Request) -> web.Response:
    """Every member's snapshot files (node/ops/snapshot_export.py); an unreachable member shows its error."""
    cluster, data_dir = _cluster(request), api_of(request).node.config.data_dir
    out = []
    for member in cluster.members():
        try:
            out.append({"node": member, "files": await snapshot_export.files_of(cluster, data_dir, member)})
        except ClusterError as e:
            out.append({"node": member, "error": str(e)})
    return json_response(request, out)


@access(ADMIN)
async def read_snapshot(request: web.Request) -> web.Response:
    """One chunk of one member's snapshot file: {"data": base64, "eof": bool}."""
    cluster, data_dir = _cluster(request), api_of(request).node.config.data_dir
    member, name = request.match_info["member"], request.match_info["name"]
    if member not in cluster.members():
        raise not_found(f"{member} is not a cluster member")
    try:
        offset = int(request.query.get("offset", "0"))
    except ValueError:
        raise bad_request("offset must be an integer") from None
    try:
        return json_response(request, await snapshot_export.chunk_of(cluster, data_dir, member, name, offset))
    except snapshot_export.SnapshotError as e:
        raise not_found(str(e)) from None
    except ClusterError as e:
        raise _cluster_error(e) from None


# ---------------------------------------------------------------- feature flags


def _metadata(cluster: Cluster):
    if not isinstance(cluster.machine, ClusterMachine):
        raise ApiError(404, "Object Not Found", "this node's cluster does not host the metadata machine")
    return cluster.machine.metadata


def _lacking(state, name: str) -> list[str]:
    return sorted(m.node for m in state.members.values() if name not in m.supported_flags)


def _flag_json(state, flag) -> dict[str, Any]:
    out = {"name": flag.name, "desc": flag.description, "stability": flag.stability,
           "introduced_in": flag.introduced_in, "depends_on": list(flag.depends_on)}  # fmt: skip
    lacking = _lacking(state, flag.name)
    if flag.name in state.feature_flags:
        out["state"] = "enabled"
    elif lacking or not state.members:
        out["state"] = "unavailable"
        out["unsupported_by"] = lacking
    else:
        out["state"] = "disabled"
    return out


@access(MONITOR)
async def list_feature_flags(request: web.Request) -> web.Response:
    cluster = _cluster(request)
    machine = _metadata(cluster)
    if query_flag(request, "consistent"):
        try:
            await cluster.fence(_timeout({}, request))
        except ClusterError as e:
            raise _cluster_error(e) from None
    state = machine.state
    return json_response(request, [_flag_json(state, f) for f in FLAGS])


@access(ADMIN)
async def enable_feature_flag(request: web.Request) -> web.Response:
    cluster = _cluster(request)
    machine = _metadata(cluster)
    body = await read_body(request)
    timeout = _timeout(body, request)
    name = request.match_info["name"]
    if name == "all":
        state = machine.state
        wanted = [f.name for f in FLAGS if f.stability == STABLE and f.name not in state.feature_flags
                  and state.members and not _lacking(state, f.name)]  # fmt: skip
    elif name in FLAGS:
        wanted = [name]
    else:
        raise not_found(f"unknown feature flag {name!r}")
    order: list[str] = []
    for flag in wanted:
        order.extend(n for n in FLAGS.plan_enable(flag) if n not in order)
    enabled = []
    for flag in order:
        if flag in machine.state.feature_flags:
            continue
        try:
            result = await cluster.propose(EnableFeatureFlag(f"enable-flag/{flag}/{uuid.uuid4()}", flag), timeout)
        except ClusterError as e:
            raise _cluster_error(e) from None
        if not getattr(result, "ok", False):
            raise ApiError(409, "precondition_failed", getattr(result, "description", str(result)))
        enabled.append(flag)
    return json_response(request, {"enabled": enabled, "node": cluster.node_id})


ROUTES = [
    ("GET", "/api/feature_flags", list_feature_flags),
    ("PUT", "/api/feature_flags/{name}/enable", enable_feature_flag),
    ("GET", "/api/cluster", cluster_status),
    ("POST", "/api/cluster/join", join_cluster),
    ("POST", "/api/cluster/forget", forget_cluster_node),
    ("POST", "/api/cluster/test/partition", partition),
    ("POST", "/api/cluster/test/heal", heal),
    ("POST", "/api/cluster/test/delay", delay),
    ("GET", "/api/cluster/test/kv", list_kv),
    ("GET", "/api/cluster/test/kv/{key}", get_kv),
    ("PUT", "/api/cluster/test/kv/{key}", put_kv),
    ("POST", "/api/cluster/test/alarm", force_alarm),
    ("GET", "/api/cluster/test/disk_fault", get_disk_faults),
    ("POST", "/api/cluster/test/disk_fault", arm_disk_fault),
    ("DELETE", "/api/cluster/test/disk_fault", clear_disk_faults),
    ("POST", "/api/quorum-queues/{op:grow|shrink}", grow_or_shrink),
    ("GET", "/api/snapshots", list_snapshots),
    ("GET", "/api/snapshots/{member}/{name}", read_snapshot),
    ("POST", "/api/quorum-queues/{vhost}/{name}/members", add_queue_member),
    ("DELETE", "/api/quorum-queues/{vhost}/{name}/members/{node}", delete_queue_member),
]
