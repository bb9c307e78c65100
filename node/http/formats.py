"""The JSON shapes of the management HTTP API, with RabbitMQ's field names,
built from live node objects at request time.

Pure functions: no aiohttp, no I/O; `node/http/api.py` calls them on the
node's event loop. Fields RabbitMQ fills from its statistics database that
Warren does not keep (per-object rates, memory per queue, GC counters) are
left out rather than faked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from node import __version__
from queues.base import Queue
from routing import rabbit_passwords

if TYPE_CHECKING:
    from node.http.management_node import ManagementNode, ScrapedNode

PROTOCOL = "AMQP 1-0"  # what RabbitMQ shows for native AMQP 1.0 connections
BUILTIN_USER = "rmq-internal"
EXCHANGE_TYPES = (
    ("direct", "AMQP direct exchange, as per the AMQP specification"),
    ("fanout", "AMQP fanout exchange, as per the AMQP specification"),
    ("headers", "AMQP headers exchange, as per the AMQP specification"),
    ("topic", "AMQP topic exchange, as per the AMQP specification"),
    ("x-local-random", "Local random exchange"),
    ("x-consistent-hash", "Consistent Hashing Exchange"),
    ("x-delayed-message", "Delayed Message Exchange"),
)


# ---------------------------------------------------------------- encoding


def _default(value: Any) -> Any:
    """AMQP values JSON has no type for (binary, described, UUID, ...)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "items"):
        return {str(k): v for k, v in value.items()}
    return str(value)


def dumps(value: Any) -> str:
    return json.dumps(value, default=_default, ensure_ascii=False)


def plain(mapping: Any) -> dict:
    """A mapping with str keys (AMQP Symbol keys, read-only proxies)."""
    return {str(k): v for k, v in dict(mapping or {}).items()}


def select_columns(value: Any, columns: list[str] | None) -> Any:
    """RabbitMQ's `?columns=a,b.c`: keeps only the named (dotted) fields."""
    if not columns:
        return value
    if isinstance(value, list):
        return [select_columns(item, columns) for item in value]
    out: dict = {}
    for column in columns:
        path = column.split(".")
        src, dst = value, out
        for i, key in enumerate(path):
            if not isinstance(src, dict) or key not in src:
                break
            if i == len(path) - 1:
                dst[key] = src[key]
            else:
                src = src[key]
                dst = dst.setdefault(key, {})
    return out


def _details(stats: dict[str, int], rates: dict[str, float] | None = None, signed: bool = False) -> dict:
    """{"publish": n, "publish_details": {"rate": r}, ...} as RabbitMQ writes
    its message_stats."""
    out: dict = {}
    for key, value in stats.items():
        out[key] = value
        rate = round((rates or {}).get(key, 0.0), 1)
        out[key + "_details"] = {"rate": rate if signed else max(0.0, rate)}
    return out


# ---------------------------------------------------------------- rates


class Rates:
    """Per-second rates of node counters, from samples taken every few
    seconds (RabbitMQ samples every 5 s): the rate is the change since the
    older of the last two samples."""

    def __init__(self, clock: Any = time.monotonic):
        self.clock = clock
        self._samples: deque[tuple[float, dict[str, int]]] = deque(maxlen=2)

    def sample(self, counters: dict[str, int]) -> None:
        self._samples.append((self.clock(), dict(counters)))

    def rates(self, counters: dict[str, int], signed: bool = False) -> dict[str, float]:
        """`signed`: of counts that go down too (a queue's messages), not only up."""
        if not self._samples:
            return {}
        then, old = self._samples[0]
        elapsed = self.clock() - then
        if elapsed <= 0:
            return {}
        low = float("-inf") if signed else 0.0
        return {k: max(low, (v - old.get(k, v)) / elapsed) for k, v in counters.items()}


def message_counts(ready: int, unacked: int) -> dict[str, int]:
    """A queue's or vhost's message counts under RabbitMQ's names."""
    return {"messages": ready + unacked, "messages_ready": ready, "messages_unacknowledged": unacked}


def queue_counts(queue: Queue) -> dict[str, int]:
    """What this node knows of a queue's counts now (a listing refreshes a remote queue's first)."""
    return message_counts(queue.message_count, queue.unacked_count)


def vhost_counts(vhost: Any) -> dict[str, int]:
    """The message counts of a vhost's queues, summed."""
    return message_counts(sum(q.message_count for q in vhost.queues.values()),
                          sum(q.unacked_count for q in vhost.queues.values()))  # fmt: skip


def counts_json(counts: dict[str, int], rates: dict[str, float] | None) -> dict:
    """The counts with their `*_details` rates of change, per second (signed)."""
    return _details(counts, rates, signed=True)


def queue_counters(queue: Queue) -> dict[str, int] | None:
    """A queue's message counters under RabbitMQ's names; None for a queue that keeps none."""
    stats = queue.stats
    if stats is None:
        return None
    return {"publish": stats.published, "deliver": stats.delivered, "deliver_get": stats.delivered,
            "redeliver": stats.redelivered, "ack": stats.acknowledged}  # fmt: skip


def churn_counters(node: ScrapedNode) -> dict[str, int]:
    """What RabbitMQ's overview `churn_rates` count; a channel is an AMQP 1.0 session."""
    m = node.metrics
    sessions = sum(len(c.engine.sessions) for c in node.connections)
    return {"connection_created": m.connections_opened, "connection_closed": m.connections_opened - len(node.connections),
            "channel_created": m.sessions_opened, "channel_closed": max(0, m.sessions_opened - sessions),
            "queue_declared": m.queues_declared, "queue_created": m.queues_created,
            "queue_deleted": m.queues_deleted}  # fmt: skip


def message_counters(metrics: Any) -> dict[str, int]:
    """Node counters under the names of RabbitMQ's message_stats."""
    return {
        "publish": metrics.published,
        "confirm": metrics.confirmed,
        "deliver": metrics.delivered,
        "deliver_get": metrics.delivered,
        "ack": metrics.acknowledged,
        "redeliver": metrics.redelivered,
        "drop_unroutable": metrics.unroutable,
    }


# ---------------------------------------------------------------- objects


def queue_json(queue: Queue, node_name: str, name_of: Callable[[str], str] = str,
               rates: dict[str, float] | None = None, count_rates: dict[str, float] | None = None) -> dict:  # fmt: skip
    """`name_of`: a member's node name from its cluster address (node/cluster/node_names.py);
    `rates`: per second, of `queue_counters`; `count_rates`: of `queue_counts`."""
    info = queue.info()
    ready = info.get("message_count", queue.message_count)
    unacked = info.get("messages_unacknowledged", 0)
    out = {
        "name": queue.name,
        "vhost": queue.vhost,
        "type": queue.type_name,
        "durable": queue.durable,
        "auto_delete": queue.auto_delete,
        "exclusive": queue.exclusive_owner is not None,
        "arguments": plain(queue.arguments),
        "node": node_name,
        "state": "running",
        **counts_json(message_counts(ready, unacked), count_rates),
        "message_bytes_ready": info.get("message_bytes_ready", 0),
        "consumers": info.get("consumer_count", queue.consumer_count),
        "exclusive_consumer_tag": None,
        **policy_json(queue),
    }
    capacity = queue.consumer_capacity
    if capacity is not None:  # RabbitMQ reports one value under both names
        out["consumer_capacity"] = out["consumer_utilisation"] = capacity
    if "members" in info:  # a replicated queue: its Raft leader and members (RabbitMQ's fields)
        out["leader"] = out["node"] = name_of(info["leader"]) if info["leader"] is not None else None
        out["leader_elected"] = info.get("leader_elected", True)  # False: the first member, until one is
        out["members"] = out["online"] = [name_of(m) for m in info["members"]]
        out["consumer_details"] = info.get("consumer_details", [])
    if "epoch" in info:  # a replicated stream's epoch (node/vhosts/stream_replication.py)
        out["epoch"] = info["epoch"]
    if "segments" in info:  # a stream's log: RabbitMQ's committed_offset and segments, and Warren's
        # first_offset (the oldest kept: retention moves it) and log_bytes (its segment files' size)
        for key in ("first_offset", "committed_offset", "segments", "log_bytes"):
            out[key] = info[key]
    counters = queue_counters(queue)
    if counters is not None:
        out["message_stats"] = _details(counters, rates)
    return out


def policy_json(queue: Queue) -> dict:
    """The policies in effect on a queue (node/vhosts/policies.py sets them)."""
    state = queue.policy_state
    if state is None:
        return {"policy": None, "operator_policy": None, "effective_policy_definition": {}}
    return {"policy": state.policy, "operator_policy": state.operator_policy,
            "effective_policy_definition": dict(state.definition)}  # fmt: skip


def policy_definition_json(policy: Any, operator: bool = False) -> dict:
    """One policy, as GET /api/policies lists it."""
    return {"vhost": policy.vhost, "name": policy.name, "pattern": policy.pattern, "apply-to": policy.apply_to,
            "definition": plain(policy.definition), "priority": policy.priority}  # fmt: skip


def exchange_counters(delayed: dict[str, int]) -> dict[str, int]:
    """A delayed exchange's counters (node/vhosts/delayed_messages.py) under RabbitMQ's exchange message_stats names."""
    return {"publish_in": delayed.get("published", 0), "publish_out": delayed.get("routed", 0)}


def exchange_json(vhost: str, exchange: Any, delayed: dict[str, int] | None = None,
                  rates: dict[str, float] | None = None) -> dict:  # fmt: skip
    """`delayed`: an x-delayed-message exchange's counts on this node, `rates` theirs per second."""
    builtin = exchange.name == "" or exchange.name.startswith("amq.")
    out = {
        "name": exchange.name,
        "vhost": vhost,
        "type": str(exchange.type),
        "durable": exchange.durable,
        "auto_delete": exchange.auto_delete,
        "internal": exchange.internal,
        "arguments": plain(exchange.arguments),
    }
    if builtin:
        out["user_who_performed_action"] = BUILTIN_USER
    if str(exchange.type) == "x-delayed-message":
        # the plugin's exchange info (the management UI shows it); the counts are this node's
        delayed = delayed or {}
        out["messages_delayed"] = delayed.get("messages_delayed", 0)
        out["message_stats"] = _details(exchange_counters(delayed), rates)
    return out


def properties_key(routing_key: str, arguments: Any) -> str:
    """The last path segment naming one binding: the routing key, and a hash
    of the arguments when there are any ("~" alone for an empty key)."""
    args = plain(arguments)
    if not args:
        return quote(routing_key, safe="") if routing_key else "~"
    digest = hashlib.sha256(dumps(sorted(args.items())).encode()).digest()[:8]
    return quote(routing_key, safe="") + "~" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def binding_json(vhost: str, binding: Any) -> dict:
    return {
        "source": binding.source,
        "vhost": vhost,
        "destination": binding.destination,
        "destination_type": str(binding.destination_kind),
        "routing_key": binding.binding_key,
        "arguments": plain(binding.arguments),
        "properties_key": properties_key(binding.binding_key, binding.arguments),
    }


def default_binding_json(vhost: str, queue: str) -> dict:
    """The implicit binding of every queue to the default exchange, which
    RabbitMQ lists too."""
    return {
        "source": "",
        "vhost": vhost,
        "destination": queue,
        "destination_type": "queue",
        "routing_key": queue,
        "arguments": {},
        "properties_key": properties_key(queue, None),
    }


def vhost_bindings(vhost: Any) -> list[dict]:
    """In RabbitMQ's order (its default sort of a bindings listing): by source (the
    default exchange's first), destination, routing key and properties key."""
    out = [default_binding_json(vhost.name, q) for q in vhost.queues]
    out += [binding_json(vhost.name, b) for b in vhost.routing.list_bindings()]
    return sorted(out, key=lambda b: (b["source"], b["destination"], b["routing_key"], b["properties_key"]))


def connection_state(conn: Any, alarms_active: bool) -> str:
    if conn.engine.closed or conn.engine.close_sent:
        return "closing"  # waiting for the peer's CLOSE, or for the socket to go
    return "blocked" if alarms_active else "running"


def connection_json(conn: Any, node_name: str, alarms_active: bool) -> dict:
    info = conn.info()
    engine = conn.engine
    sockname = conn.transport.get_extra_info("sockname") if conn.transport is not None else None
    remote = getattr(engine, "remote_open", None)
    out = {
        "name": info["name"],
        "node": node_name,
        "type": "network",
        "user": info["user"],
        "vhost": info["vhost"],
        "protocol": info.get("protocol", PROTOCOL),
        "host": sockname[0] if sockname else None,
        "port": sockname[1] if sockname else None,
        "peer_host": info["peer_host"],
        "peer_port": info["peer_port"],
        "channels": info["channels"],
        "connected_at": info["connected_at"],
        "recv_oct": info["recv_oct"],
        "recv_cnt": info["recv_cnt"],
        "send_oct": info["send_oct"],
        "send_cnt": info["send_cnt"],
        "state": connection_state(conn, alarms_active),
        "ssl": info.get("ssl", False),
        "peer_cert_subject": info.get("peer_cert_subject"),
        "frame_max": engine.max_frame_size,
        "channel_max": engine.channel_max,
        "timeout": int(engine.idle_timeout or 0),
        "client_properties": {},
    }
    if remote is not None:
        props = plain(remote.properties)
        if remote.container_id:
            props.setdefault("container_id", remote.container_id)
        out["client_properties"] = props
    return out


def vhost_json(vhost: Any, node_name: str, count_rates: dict[str, float] | None = None) -> dict:
    """`count_rates`: per second, of the vhost's message counts."""
    description = getattr(vhost, "description", "")
    tags = list(getattr(vhost, "tags", []))
    metadata: dict[str, Any] = {"description": description, "tags": tags}
    if vhost.default_queue_type:  # RabbitMQ's metadata holds it only when set
        metadata["default_queue_type"] = vhost.default_queue_type
    if vhost.protected_from_deletion:
        metadata["protected_from_deletion"] = True
    out = {
        "name": vhost.name,
        "description": description,
        "tags": tags,
        "default_queue_type": vhost.default_queue_type or "classic",
        "protected_from_deletion": vhost.protected_from_deletion,
        "metadata": metadata,
        "tracing": False,
        "cluster_state": {node_name: "running"},
    }
    if vhost.queues:  # RabbitMQ's counts are its queues' statistics: a vhost without queues has none
        out.update(counts_json(vhost_counts(vhost), count_rates))
    return out


def user_json(user: Any, hashing_algorithm: str) -> dict:
    password_hash = user.password_hash
    rabbit = rabbit_passwords.export(password_hash)  # imported from RabbitMQ, not yet rehashed
    if rabbit is not None:
        hashing_algorithm, password_hash = rabbit
    return {
        "name": user.name,
        "password_hash": password_hash,
        "hashing_algorithm": hashing_algorithm,
        "tags": list(user.tags),
        "limits": {},
    }


def permission_json(user: str, vhost: str, permission: Any) -> dict:
    return {
        "user": user,
        "vhost": vhost,
        "configure": permission.configure,
        "write": permission.write,
        "read": permission.read,
    }


def parse_tags(tags: Any) -> list[str]:
    """Tags as RabbitMQ accepts them: a comma-separated string or a list."""
    if tags is None:
        return []
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        return [t.strip() for t in tags if t.strip()]
    raise ValueError("tags must be a comma-separated string or a list of strings")


# ---------------------------------------------------------------- node-wide


def node_json(node: ManagementNode, started_at: float, resources: dict) -> dict:
    cfg = node.config
    alarms = node.alarms
    return {
        "name": cfg.node_name,
        "type": "disc",
        "running": True,
        "os_pid": str(resources["os_pid"]),
        "mem_used": resources["mem_used"],
        "mem_limit": resources["mem_limit"],
        "mem_alarm": alarms.raised("memory"),
        # RabbitMQ's name for "what the runtime says it holds" rather than RSS (node/ops/memory.py)
        "mem_calculation_strategy": "allocated",
        "disk_free": resources["disk_free"],
        "disk_free_limit": alarms.disk_free_limit,
        "disk_free_alarm": alarms.raised("disk"),
        "fd_used": resources.get("fd_used", 0),
        "fd_total": resources.get("fd_total", 0),
        "sockets_used": len(node.connections),
        "sockets_total": resources.get("fd_total", 0),  # a socket is a file descriptor: the same bound
        "processors": resources.get("processors", 1),
        "uptime": int((time.monotonic() - started_at) * 1000),  # started_at is monotonic
        "db_dir": cfg.data_dir,
        "net_ticktime": 60,
        "partitions": [],
        "being_drained": False,
        "exchange_types": [{"name": n, "description": d, "enabled": True} for n, d in EXCHANGE_TYPES],
        "auth_mechanisms": [{"name": m, "description": "", "enabled": True} for m in ("PLAIN", "ANONYMOUS")],
    }


def object_totals(node: ManagementNode, vhosts: list[Any]) -> dict:
    names = {v.name for v in vhosts}
    return {
        "connections": sum(1 for c in node.connections if c.vhost is not None and c.vhost.name in names),
        "channels": sum(
            len(c.engine.sessions) for c in node.connections if c.vhost is not None and c.vhost.name in names
        ),  # fmt: skip
        "consumers": sum(q.consumer_count for v in vhosts for q in v.queues.values()),
        "exchanges": sum(len(v.routing.exchanges()) for v in vhosts),
        "queues": sum(len(v.queues) for v in vhosts),
    }


def cluster_name(node: ScrapedNode) -> str:
    """The global parameter cluster_name (set by a definitions import), else
    this node's name (RabbitMQ's default is its first node's)."""
    return node.projections.global_parameters.get("cluster_name", node.config.node_name)


def overview_json(node: ManagementNode, vhosts: list[Any], rates: dict[str, float], listeners: list[dict],
                  churn_rates: dict[str, float] | None = None, count_rates: dict[str, float] | None = None) -> dict:  # fmt: skip
    cfg = node.config
    ready = sum(q.message_count for v in vhosts for q in v.queues.values())
    unacked = sum(q.unacked_count for v in vhosts for q in v.queues.values())
    return {
        "management_version": cfg.product_version,
        "rates_mode": "basic",
        "exchange_types": [{"name": n, "description": d, "enabled": True} for n, d in EXCHANGE_TYPES],
        "product_version": __version__,
        "product_name": "Warren",
        "rabbitmq_version": cfg.product_version,
        "cluster_name": cluster_name(node),
        "disable_stats": False,
        "enable_queue_totals": True,
        "message_stats": _details(message_counters(node.metrics), rates),
        "churn_rates": _details(churn_counters(node), churn_rates),
        "queue_totals": counts_json(message_counts(ready, unacked), count_rates),
        "object_totals": object_totals(node, vhosts),
        "statistics_db_event_queue": 0,
        "node": cfg.node_name,
        "listeners": listeners,
        "contexts": contexts(node),
    }


def contexts(node: ManagementNode) -> list[dict]:
    """The HTTP listeners' contexts, as RabbitMQ's overview and nodes show them."""
    return [{"node": node.config.node_name, "description": "Warren Management", "path": "/",
             "port": str(node.http_port)}]  # fmt: skip
