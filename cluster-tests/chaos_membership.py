"""The membership faults (ComposeCluster.forget, rejoin; the nemesis kind forget-rejoin).

A node is stopped (SIGTERM: it hands its leaderships over), forgotten by the cluster
(`POST /api/cluster/forget` on another node, as `rabbitmqctl forget_cluster_node`: it leaves
the metadata group and every quorum queue and stream it had a replica of) and its data
wiped (the Docker volume emptied, as a replaced machine comes back). While it is away the
others serve with one member fewer. The heal starts it again, blank, with the seeds it
was first started with: it finds that they form a cluster without it and joins it
(node/cluster/discovery.py, "Static seeds"), under load, and it is added back to the quorum
queues and streams of vhost "/" it had replicas of (`rabbitmqctl add_member`, which takes
streams too), so the runs go on with three replicas.

A queue the forget could not shrink (`not_shrunk`: its leader was the forgotten node and the
replicas left are no majority without it, e.g. a stream of two replicas) still counts the
node as a replica, and the node comes back wiped all the same, as a replaced machine does:
the first run of this fault found a stream's leader back with an empty log, its replica
cutting 186 confirmed messages to it (fixed: node/vhosts/stream_failover.py, a leader whose
log was lost has another replica elected).

What it must not hit: the node of a classic queue whose messages are checked (a classic
queue's messages live on its node only; wiping it loses them, by design, as in RabbitMQ):
the nemesis picks another node (chaos_nemesis.Nemesis `keep`).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from http_json import HttpError  # tests/support, on sys.path by conftest.py

DATA = "/var/lib/warren/data"  # WARREN_DATA_DIR in deploy/docker-compose.yml, on the node's volume
FORGET_FOR = 60.0  # seconds the forget is tried for (refused while the stopped node still leads)
REJOIN_WAIT = 90.0  # seconds the rejoined node has to answer (it joins before its API starts)
IN_SYNC_WAIT = 30.0  # seconds a quorum queue's new replica has to catch up before the heal is done


class MembershipFaults:
    """ComposeCluster's membership faults (its `http`, `_nemesis`, `container`, `wait_answers`,
    `queue_member`, `image`, `nodes`, `paused`), each recorded in the history as process
    "nemesis"."""

    forgotten: dict[str, list[str]]  # node -> the quorum queues and streams of "/" it had a replica of
    nodes: list[str]
    paused: dict[str, str]
    image: str
    _ips: dict[str, str]
    http: Any
    _nemesis: Any
    container: Any
    wait_answers: Any
    queue_member: Any
    node_id: Any

    def forget(self, node: str) -> None:
        """Stop `node`, forget it through another node, empty its data volume."""
        with self._nemesis("forget", node, node) as op:
            self.container(node).stop(timeout=10)
            via, answer = self._forget_through_another(node)
            shrunk = answer.get("queues_shrunk", [])
            self.forgotten[node] = sorted((q["name"], q["type"]) for q in shrunk if q.get("vhost") == "/" and "members" in q)
            self._wipe(node)
            op.ok(via=via, shrunk=len(shrunk), not_shrunk=[q["name"] for q in shrunk if "members" not in q])

    def _forget_through_another(self, node: str) -> tuple[str, dict]:
        deadline, error = time.monotonic() + FORGET_FOR, None
        while time.monotonic() < deadline:
            for via in self.nodes:
                if via == node or via in self.paused:
                    continue
                try:
                    return via, self.http(via, "POST", "/api/cluster/forget", {"node": self.node_id(node)}, timeout=40)
                except HttpError as e:
                    if e.status == 404 and error is not None:  # an earlier try did it, its answer lost
                        return via, {}
                    error = e  # a 409 while it still leads, a 503 while there is no leader
                except (OSError, AssertionError) as e:
                    error = e
            time.sleep(0.5)
        raise AssertionError(f"forget {node}: {error}")

    def _wipe(self, node: str) -> None:
        """Empty the stopped node's data directory, through a throwaway container on its volumes."""
        client = self.container(node).client
        client.containers.run(self.image, entrypoint=["rm", "-rf", DATA], user="root", remove=True,
                              volumes_from=[self.container(node).id], network_mode="none")  # fmt: skip

    def rejoin(self, node: str) -> None:
        """Start the forgotten node again (blank: it joins through its seeds) and add it back to
        the quorum queues and streams it had replicas of."""
        with self._nemesis("rejoin", node, node) as op:
            self.container(node).start()
            self._ips.pop(node, None)
            self.wait_answers(node, REJOIN_WAIT)
            added, gone, lagging = [], [], []
            for queue, kind in self.forgotten.pop(node, []):
                try:
                    self.http(node, "GET", f"/api/queues/%2F/{quote(queue, safe='')}")
                    self.queue_member(queue, node, add=True)
                    added.append(queue)
                except (HttpError, AssertionError):  # deleted meanwhile (the metadata workload's)
                    gone.append(queue)
                    continue
                if kind == "quorum" and not self._until_in_sync(queue, node):
                    lagging.append(queue)
            op.ok(added=added, not_added=gone, not_in_sync=lagging)

    def _until_in_sync(self, queue: str, node: str) -> bool:
        """Until the queue's leader counts `node`'s replica as having the log it had committed
        when first asked: the heal ends on a whole cluster (a new replica that still copies the
        log is no vote yet, so a fault right after would leave its group without a majority).
        A fixed target: under load the commit index moves on ahead of any one follower."""
        deadline, target = time.monotonic() + IN_SYNC_WAIT, None
        path = f"/api/queues/quorum/%2F/{quote(queue, safe='')}/status"
        while time.monotonic() < deadline:
            for via in self.nodes:
                try:
                    rows = self.http(via, "GET", path, timeout=3)
                except (OSError, HttpError, AssertionError):
                    continue
                leader = next((r for r in rows if r["Raft State"] == "leader"), None)
                mine = next((r for r in rows if r["Node Name"] == f"warren@{node}"), None)
                if leader is None or mine is None:
                    continue
                target = leader["Commit Index"] if target is None else target
                if (mine["Last Written"] or 0) >= target:
                    return True
            time.sleep(0.2)
        return False
