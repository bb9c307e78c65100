"""What worker 0's HTTP API asks the node's other workers about their client connections
(over the control link: metadata_follow.py `ask`), and how a worker answers (issue 36: the
HTTP API sees one node). Each answer is JSON, as the API shows it; None when a worker has
nothing to say (the connection named is not its own).

    ["connections"]             its open connections, each naming its `worker`
    ["sessions", name]          {"user", "sessions"} of its connection `name`
    ["consumers", [vhost...]]   its connections' consumers in those vhosts
    ["close", name, reason]     closes its connection `name`: true when it had it
    ["scrape"]                  its counters and connections' counts (scrape.py)
    ["snapshot"]                its part of the node's snapshot record: connections, sessions
                                and links counted, its queues' records (node/ops/state_snapshot.py)
    ["adopt", worker, lost, queues]   worker `worker` only: copies those queues from the lost
                                worker's store (lost_workers.py); the [vhost, name] of those copied
    ["force_alarm", worker, resource, on]   worker `worker` only: raises or clears an alarm of
                                its own (the test hook POST /api/cluster/test/alarm); its alarms"""

from __future__ import annotations

import json
from typing import Any

from amqp.errors import Condition
from node.http.client_views import connection_consumers, session_json
from node.http.formats import connection_json
from node.ops.state_snapshot import client_counts, queue_records

from .lost_workers import adopt
from .scrape import summary

__all__ = ["answer"]


def answer(worker: Any, question: list) -> Any:
    """Worker `worker`'s (a WorkerNode's) answer to `question`."""
    kind, args = question[0], question[1:]
    node_name = worker.config.node_name
    opened = [conn for conn in worker.connections if conn.vhost is not None]
    if kind == "connections":
        return json.dumps([connection_json(conn, node_name, worker.alarms.active) | {"worker": worker.index}
                           for conn in opened])  # fmt: skip
    if kind == "consumers" and len(args) == 1:
        return json.dumps(connection_consumers(opened, set(args[0]), node_name))
    if kind == "scrape":
        return summary(worker.index, worker.metrics, worker.connections, worker.alarms)
    if kind == "adopt" and len(args) == 3:
        return adopt(worker, worker.config.data_dir, args[1], args[2]) if args[0] == worker.index else None
    if kind == "force_alarm" and len(args) == 3:  # the test hook POST /api/cluster/test/alarm
        if args[0] != worker.index:
            return None
        worker.alarms.force(args[1], args[2])
        return json.dumps(worker.alarms.own())
    if kind == "snapshot":
        connections, sessions, links = client_counts(worker.connections)
        queues, _ = queue_records(worker.vhosts.values(), None, worker.index)
        return json.dumps({"worker": worker.index, "connections": connections, "sessions": sessions, "links": links,
                           "queues": queues})  # fmt: skip
    conn = next((c for c in opened if args and c.name == args[0]), None)
    if kind == "sessions" and len(args) == 1 and conn is not None:
        return json.dumps({"user": conn.user, "sessions": [session_json(s) for _, s in
                                                           sorted(conn.engine.sessions.items())]})  # fmt: skip
    if kind == "close" and len(args) == 2:
        if conn is not None:
            conn.force_close(Condition.CONNECTION_FORCED, args[1])
        return json.dumps(conn is not None)
    return None
