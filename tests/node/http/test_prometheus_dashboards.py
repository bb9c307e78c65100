"""RabbitMQ's published Grafana dashboards (RabbitMQ-Overview,
RabbitMQ-Quorum-Queues-Raft, RabbitMQ-Stream) find a series for every metric
their queries name on a node with traffic, and the labels their joins and
variables read (data/rabbitmq_dashboards.json: the names, `le` values and
selector labels in their PromQL, listed by scripts/dashboard-metrics.py
from the commits it records). The Stream dashboard's stream-protocol error
counters are the exception: Warren has no stream protocol."""

from __future__ import annotations

import json
import pathlib
import re
import urllib.request

import pytest
from mgmt_client import scrape
from proton import Message
from proton.utils import BlockingConnection

DASHBOARDS = json.loads((pathlib.Path(__file__).parent / "data" / "rabbitmq_dashboards.json").read_text())["dashboards"]
NO_STREAM_PROTOCOL = re.compile(r"rabbitmq_global_stream_error_\w+_total")
# labels a Kubernetes scrape adds (the dashboards' `namespace` variable) and the families' own
SCRAPE_LABELS = {"namespace", "le", "protocol"}


def series(text: str) -> dict[str, list[dict[str, str]]]:
    """Every sample's labels, by sample name."""
    out: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$", line)
        if m and not line.startswith("#"):
            out.setdefault(m.group(1), []).append(dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
    return out


def traffic(node) -> BlockingConnection:
    """Publishes messages of several sizes to a quorum and a classic queue,
    consumes from both, and returns the connection, its publishers and a
    consumer still attached."""
    from metadata import commands as mc
    from node.vhosts.metadata_store import new_key

    node.metadata(mc.EnableFeatureFlag(new_key(), "quorum_queue_v1"))
    node.declare_queue("qq", **{"x-queue-type": "quorum"})
    node.declare_queue("cq")
    conn = BlockingConnection(node.url, timeout=10)
    for address in ("/queues/qq", "/queues/cq"):
        sender = conn.create_sender(address)
        for i in range(3):
            sender.send(Message(body="x" * (50 * 10**i)))
    receiver = conn.create_receiver("/queues/cq", credit=3)
    for _ in range(3):
        receiver.receive(timeout=10)
        receiver.accept()
    conn.create_receiver("/queues/qq", credit=1).receive(timeout=10)
    return conn


def check_dashboards(text: str, endpoint: str) -> None:
    """Every dashboard finds each metric it queries in `text`, a page whose
    rabbitmq_endpoint (the dashboards' endpoint variable) is `endpoint`."""
    found = series(text)
    (identity,) = found["rabbitmq_identity_info"]
    assert identity["rabbitmq_endpoint"] == endpoint
    for name, dashboard in DASHBOARDS.items():
        missing = [m for m in dashboard["metrics"] if m not in found and not NO_STREAM_PROTOCOL.fullmatch(m)]
        assert not missing, f"{name} ({dashboard['commit'][:12]}) at {endpoint}: no series for {missing}"
        # the selectors' labels are on rabbitmq_identity_info, which every query joins
        assert set(dashboard["selector_labels"]) - SCRAPE_LABELS <= identity.keys(), name
        # the histogram buckets the Overview's message size panels pick by `le`
        les = {s["le"] for s in found.get("rabbitmq_message_size_bytes_bucket", [])}
        assert set(dashboard["le"]) <= les, name
    # what the Overview's joins carry over from build_info and identity_info
    assert {"rabbitmq_version", "erlang_version"} <= found["rabbitmq_build_info"][0].keys()
    assert {"rabbitmq_cluster", "rabbitmq_node", "rabbitmq_endpoint"} <= identity.keys()


# The endpoint values the dashboards' endpoint variable lists (label_values of
# rabbitmq_identity_info, memory-breakdown's left out) that a scrape of the
# rabbitmq_-named families gives: /metrics aggregated (RabbitMQ's default),
# /metrics per object (return_per_object_metrics) and /metrics/per-object.
@pytest.mark.parametrize(("per_object_setting", "path", "endpoint"), [
    (False, "/metrics", "aggregated"),
    (True, "/metrics", "per-object"),
    (False, "/metrics/per-object", "per-object"),
])  # fmt: skip
def test_every_metric_the_dashboards_query_has_a_series(broker_factory, per_object_setting, path, endpoint):
    node = broker_factory(http_port=0, metrics_port=0, prometheus_return_per_object_metrics=per_object_setting)
    conn = traffic(node)
    try:
        text = scrape(node, path)
    finally:
        conn.close()
    check_dashboards(text, endpoint)
    # the per-object labels are there exactly when the endpoint says so
    queues = {s.get("queue") for s in series(text)["rabbitmq_queue_messages_ready"]}
    assert queues == ({"qq", "cq"} if endpoint == "per-object" else {None})


def test_identity_carries_the_endpoint_and_the_cluster_permanent_id(node):
    port = node.broker.metrics_port
    ids = set()
    for path, endpoint in (("/metrics", "aggregated"), ("/metrics/per-object", "per-object"),
                           ("/metrics/detailed?family=queue_coarse_metrics", "detailed"),
                           ("/metrics/memory-breakdown", "memory-breakdown")):  # fmt: skip
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            text = r.read().decode()
        assert "# TYPE rabbitmq_identity_info untyped" in text, path
        (identity,) = series(text)["rabbitmq_identity_info"]
        assert identity["rabbitmq_endpoint"] == endpoint, path
        assert identity["rabbitmq_node"] == "warren@test"
        ids.add(identity["rabbitmq_cluster_permanent_id"])
    # one id, seeded when the cluster was set up, as RabbitMQ's
    (permanent,) = ids
    assert permanent.startswith("rabbitmq-cluster-id-") and len(permanent) > len("rabbitmq-cluster-id-") + 10
