"""What the HTTP API shows of a client connection's insides: its sessions and links (as
RabbitMQ 4.2 shows an AMQP 1.0 connection's) and its consumers. Pure functions of the
connection, so that a worker of a node with several workers answers for its own connections
with what worker 0's API shows of its own (node/workers/questions.py)."""

from __future__ import annotations

from typing import Any

from amqp import definitions as d
from node.client.links import QueueConsumer

__all__ = ["connection_consumers", "consumer_json", "session_json"]

_SETTLE_MODES = {d.SND_UNSETTLED: "unsettled", d.SND_SETTLED: "settled", d.SND_MIXED: "mixed"}


def _address(terminus: Any) -> str | None:
    return getattr(terminus, "address", None)


def _link_json(link: Any) -> dict:
    common = {"handle": link.handle, "link_name": link.name, "max_message_size": link.max_message_size or 0,
              "delivery_count": link.delivery_count, "credit": link.link_credit}  # fmt: skip
    if link.is_sender:  # we send: a consumer's link
        queue = getattr(link.context, "queue", None)
        return {**common, "source_address": _address(link.source), "queue_name": getattr(queue, "name", ""),
                "send_settled": link.snd_settle_mode == d.SND_SETTLED, "filter": [],
                "consumer_timeout": False}  # fmt: skip
    return {**common, "snd_settle_mode": _SETTLE_MODES.get(link.snd_settle_mode, "mixed"),
            "target_address": _address(link.target),
            "unconfirmed_messages": getattr(link.context, "unconfirmed", 0)}  # fmt: skip


def session_json(session: Any) -> dict:
    links = list(session.links.values())
    return {
        "channel_number": session.channel,
        "handle_max": session.handle_max,
        "next_incoming_id": session.next_incoming_id,
        "incoming_window": session.incoming_window,
        "next_outgoing_id": session.next_outgoing_id,
        "remote_incoming_window": session.remote_incoming_window,
        "remote_outgoing_window": session.remote_outgoing_window,
        "outgoing_unsettled_deliveries": len(session.outgoing_unsettled),
        "incoming_links": [_link_json(link) for link in links if not link.is_sender],
        "outgoing_links": [_link_json(link) for link in links if link.is_sender],
    }


def consumer_json(conn: Any, session: Any, link: Any, consumer: QueueConsumer, node_name: str) -> dict:
    queue = consumer.queue
    activity = queue.consumer_activity(consumer)  # "up", "single_active" or "waiting"
    return {
        "arguments": {},
        "ack_required": not consumer.presettled,
        "active": activity != "waiting",
        "activity_status": activity,
        "consumer_tag": link.name,
        "exclusive": False,
        "prefetch_count": link.link_credit,
        "queue": {"name": queue.name, "vhost": queue.vhost},
        "channel_details": {
            "connection_name": conn.name,
            "name": f"{conn.name} ({session.channel})",
            "node": node_name,
            "number": session.channel,
            "peer_host": conn.peer[0],
            "peer_port": conn.peer[1],
            "user": conn.user,
        },
    }


def connection_consumers(connections: Any, vhosts: set[str], node_name: str) -> list[dict]:
    """The consumers of these connections in these vhosts."""
    out = []
    for conn in list(connections):
        if conn.vhost is None or conn.vhost.name not in vhosts:
            continue
        for session in list(conn.engine.sessions.values()):
            for link in list(session.links.values()):
                if isinstance(link.context, QueueConsumer):
                    out.append(consumer_json(conn, session, link, link.context, node_name))
    return out
