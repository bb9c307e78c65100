"""Peer discovery by DNS (node/cluster/discovery.py): real Clusters over gRPC on loopback
addresses 127.0.0.N, all on one port; only name resolution is given, by a resolver function
(a registry a node is added to when it starts, as docker's embedded DNS adds a replica)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random

import pytest
import uvloop

from node import config
from node.cluster.cluster import Cluster, ClusterError
from node.cluster.discovery import node_id_of, parse_seeds_dns, resolve_addresses
from node.cluster.identity import free_port
from node.cluster.kv import KeyValueMachine, Put
from raft.transport import TransportOptions

SECRET = "discovery-secret"
OPTIONS = TransportOptions(backoff_initial=0.02, backoff_max=0.3)
NAME = "warren.test"


class Dns:
    """Name -> addresses; `lookups` counts the resolutions asked for."""

    def __init__(self) -> None:
        self.addresses: list[str] = []
        self.lookups = 0

    def resolve(self, name: str) -> list[str]:
        assert name == NAME
        self.lookups += 1
        return list(self.addresses)


def _node(tmp_path, address: str, port: int, dns: Dns, **kw) -> Cluster:
    return Cluster(data_dir=str(tmp_path / address), machine=KeyValueMachine(), listen_host=address,
                   advertise_host=address, port=port, secret=SECRET, transport_options=OPTIONS,
                   seeds_dns=NAME, resolver=dns.resolve, seeds_dns_retry_interval=0.05,
                   **{"seeds_dns_timeout": 30.0, **kw})  # fmt: skip


async def _start(node: Cluster, dns: Dns, address: str, delay: float = 0.0) -> Cluster:
    await asyncio.sleep(delay)
    dns.addresses.append(address)  # registered when its container starts
    await node.start()
    return node


@contextlib.asynccontextmanager
async def _stopping(nodes: list[Cluster]):
    try:
        yield nodes
    finally:
        for n in nodes:
            await n.stop()


def test_seeds_dns_settings_and_their_checks():
    assert parse_seeds_dns("warren", 25672) == ("warren", 25672)
    assert parse_seeds_dns("warren.internal:4000", 25672) == ("warren.internal", 4000)
    for bad in ("warren:x", ":25672", "warren:0", "a:b:1"):
        with pytest.raises(ValueError, match="seeds_dns"):
            parse_seeds_dns(bad, 25672)
    assert node_id_of("10.0.0.2", 25672) == "10.0.0.2:25672" and node_id_of("fd00::2", 1) == "[fd00::2]:1"
    assert "127.0.0.1" in resolve_addresses("localhost") and resolve_addresses("no-such-name.invalid") == []
    cfg = config.load(env={"WARREN_SEEDS_DNS": "warren:25672", "WARREN_SEEDS_DNS_TIMEOUT": "5"})
    assert cfg.seeds_dns == "warren:25672" and cfg.seeds_dns_timeout == 5.0
    with pytest.raises(ValueError, match="needs --cluster-secret"):
        Cluster.from_config(config.Config(seeds_dns="warren"), KeyValueMachine())
    with pytest.raises(ValueError, match="both given"):
        Cluster.from_config(config.Config(seeds_dns="warren", seeds=["a:1"], cluster_secret="s"), KeyValueMachine())
    with pytest.raises(ValueError, match="fixed --grpc-port"):
        Cluster.from_config(config.Config(seeds_dns="warren", grpc_port=0, cluster_secret="s"), KeyValueMachine())
    with pytest.raises(ValueError, match="must be positive"):
        Cluster.from_config(config.Config(seeds_dns="warren", cluster_secret="s", seeds_dns_timeout=0),
                            KeyValueMachine())  # fmt: skip
    from node.cli import build_parser, server_config

    args = build_parser().parse_args(["server", "--seeds-dns", "warren", "--seeds-dns-timeout", "7"])
    cfg = server_config(args)
    assert cfg.seeds_dns == "warren" and cfg.seeds_dns_timeout == 7.0


@pytest.mark.slow
def test_three_nodes_started_together_form_one_cluster_a_fourth_joins_and_a_node_with_data_ignores_discovery(
    tmp_path,
):
    async def main():
        port = free_port("127.0.0.1")
        dns = Dns()
        addresses = ["127.0.0.3", "127.0.0.1", "127.0.0.2"]
        nodes = [_node(tmp_path, a, port, dns) for a in addresses]
        async with _stopping(nodes):
            await asyncio.gather(*(_start(n, dns, a) for n, a in zip(nodes, addresses, strict=True)))
            ids = sorted(f"{a}:{port}" for a in addresses)
            assert all(n.members() == ids for n in nodes)
            assert await nodes[0].propose(Put("k", "1")) == 1
            assert all(n.discovery.state == "member" for n in nodes)
            assert not any(os.path.exists(os.path.join(n.identity.dir, "discovering")) for n in nodes)
            # a fourth replica, later: it finds the cluster and joins it, even through members that
            # answer as a Warren without peer discovery does (no "discover" call: always a member)
            for n in nodes:
                del n.calls["discover"]
            fourth = _node(tmp_path, "127.0.0.4", port, dns)
            nodes.append(fourth)
            await _start(fourth, dns, "127.0.0.4")
            assert fourth.members() == sorted([*ids, f"127.0.0.4:{port}"])
            assert await fourth.propose(Put("k", "2")) == 2
            assert fourth.machine.data["k"] == ("2", 2)
            # a node with data restarts: no discovery, even with an answer naming other nodes
            first = nodes.pop(1)
            await first.stop()
            dns.addresses = ["127.0.0.9"]
            lookups = dns.lookups
            again = _node(tmp_path, "127.0.0.1", port, dns)
            nodes.append(again)
            await again.start()
            assert dns.lookups == lookups and again.members() == fourth.members()
            await again.fence()

    uvloop.run(main())


@pytest.mark.slow
def test_two_nodes_started_together_never_form_two_clusters(tmp_path):
    """Each pair starts in a random order, a random moment apart (0 to 0.3 s: both inside one
    another's rounds, or one after the other has formed), the lower or higher address first."""

    async def main():
        rng = random.Random(35)
        for trial in range(6):
            port = free_port("127.0.0.1")
            dns = Dns()
            addresses = ["127.0.0.1", "127.0.0.2"]
            rng.shuffle(addresses)
            nodes = [_node(tmp_path / str(trial), a, port, dns) for a in addresses]
            async with _stopping(nodes):
                delay = rng.uniform(0, 0.3)
                await asyncio.gather(_start(nodes[0], dns, addresses[0]), _start(nodes[1], dns, addresses[1], delay))
                assert nodes[0].members() == nodes[1].members() == [f"127.0.0.1:{port}", f"127.0.0.2:{port}"], trial

    uvloop.run(main())


@pytest.mark.slow
def test_a_node_that_finds_no_cluster_in_time_fails_and_stays_blank(tmp_path):
    async def main():
        port = free_port("127.0.0.1")
        dns = Dns()  # never lists the node
        node = _node(tmp_path, "127.0.0.1", port, dns, seeds_dns_timeout=0.3)
        with pytest.raises(ClusterError, match="no cluster to join or form from warren.test within"):
            await node.start()
        assert not node.running and dns.lookups >= 2
        # the next boot discovers again (the marker survived), and forms alone once listed
        again = _node(tmp_path, "127.0.0.1", port, dns)
        dns.addresses = ["127.0.0.1"]
        await again.start()
        try:
            assert again.members() == [f"127.0.0.1:{port}"] and again.discovery.state == "member"
            assert not os.path.exists(os.path.join(again.identity.dir, "discovering"))
        finally:
            await again.stop()

    uvloop.run(main())


@pytest.mark.slow
def test_a_node_process_that_finds_no_peers_in_time_exits_69_saying_why(tmp_path):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "node.cli", "server", "--data-dir", str(tmp_path / "data"), "--listen-host",
           "127.0.0.1", "--amqp-port", "-1", "--http-port", "-1", "--metrics-port", "-1", "--grpc-port",
           str(free_port("127.0.0.1")), "--cluster-secret", SECRET, "--seeds-dns", "no-such-name.invalid",
           "--seeds-dns-timeout", "0.5", "--seeds-dns-retry-interval", "0.1"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 69, run.stderr[-2000:]
    assert "not starting: peer discovery: no-such-name.invalid never resolved" in run.stderr
