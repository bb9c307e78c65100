"""How a node tells itself apart in its seeds, and `--grpc-port -1` (no
cluster): what an operator writes in --seeds is what the cluster uses."""

from __future__ import annotations

import socket

import pytest

from node.cluster.identity import free_port, seed_naming_this_node

pytestmark = pytest.mark.timeout(90)


def test_a_seed_names_this_node_by_an_address_it_owns_and_its_port():
    port = free_port("127.0.0.1")
    seeds = ["nosuchhost.invalid:25672", f"192.0.2.1:{port}", f"127.0.0.1:{port + 1}", f"127.0.0.1:{port}"]
    assert seed_naming_this_node(seeds, port) == f"127.0.0.1:{port}"
    assert seed_naming_this_node([f"localhost:{port}"], port) == f"localhost:{port}"
    assert seed_naming_this_node(seeds[:3], port) is None  # a documentation address is no one here
    assert seed_naming_this_node(seeds, 0) is None


def test_seeds_naming_this_node_by_ip_form_a_cluster_when_it_advertises_localhost(broker_factory):
    port = free_port("127.0.0.1")
    # listening on localhost, so its default advertised host is "localhost"; the seeds say 127.0.0.1
    b = broker_factory(listen_host="localhost", grpc_port=port, seeds=[f"127.0.0.1:{port}"], cluster_secret="s3cret",
                       cluster_ready_timeout=20)  # fmt: skip
    cluster = b.broker.cluster
    assert cluster.node_id == f"127.0.0.1:{port}"
    assert b.call(lambda: cluster.group.leader_id) is not None
    b.declare_queue("works")
    assert "works" in b.vhost.queues


def test_grpc_port_minus_one_is_a_node_without_a_cluster(broker_factory):
    b = broker_factory(grpc_port=-1)
    node_id = b.broker.cluster.node_id
    host, _, port = node_id.rpartition(":")
    assert host == "127.0.0.1"  # its metadata store listens on loopback only
    with socket.create_connection(("127.0.0.1", int(port)), timeout=5):
        pass
    b.declare_queue("q")
    assert "q" in b.vhost.queues


def test_grpc_port_minus_one_takes_no_seeds(broker_factory):
    with pytest.raises(ValueError, match="without a cluster"):
        broker_factory(grpc_port=-1, seeds=["127.0.0.1:1"], cluster_secret="s")
