"""Who may talk to a node's transport: the cluster secret (HMAC over the stream
metadata, both ways), stale or unauthenticated streams, mutual TLS with the
cluster's CA, and clean failures at start."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import grpc
import pytest
import uvloop
from transport_helpers import FAST, SECRET, collect, nodes, until

from raft.grpc_auth import stream_metadata
from raft.proto import cluster_pb2_grpc
from raft.transport import NodeTransport, TlsConfig

# -- authentication -----------------------------------------------------------------


def test_a_wrong_secret_is_refused_both_ways():
    async def main():
        async with nodes(3, secrets=[SECRET, SECRET, "wrong"], connect=False) as (a, b, c):
            got_a, got_c = collect(a), collect(c)
            for t in (a, b, c):
                for u in (a, b, c):
                    if u is not t:
                        t.add_peer(u.node_id)
            await until(lambda: a.is_connected(b.node_id) and b.is_connected(a.node_id))
            await until(lambda: a.stats.auth_failures >= 2 and c.stats.auth_failures >= 2, what="refusals")
            assert not c.is_connected(a.node_id) and not a.is_connected(c.node_id)
            assert not c.send_node_message(a.node_id, "x", b"intruder")
            assert not a.send_node_message(c.node_id, "x", b"secret stuff")
            assert a.epoch_from(c.node_id) is None and c.epoch_from(a.node_id) is None
            await asyncio.sleep(0.1)
            assert got_a == [] and got_c == []

    uvloop.run(main())


def test_streams_without_valid_credentials_are_refused():
    async def main():
        async with nodes(1, connect=False) as (b,):
            got = collect(b)
            async with grpc.aio.insecure_channel(b.node_id) as channel:
                stub = cluster_pb2_grpc.ClusterStub(channel)
                good = dict(stream_metadata(SECRET, "10.1.1.1:25672", b.node_id, 5))
                cases = [
                    (),
                    tuple(stream_metadata("other", "10.1.1.1:25672", b.node_id, 5)),
                    tuple(stream_metadata(SECRET, "10.1.1.1:25672", "10.2.2.2:25672", 5)),  # token for another node
                    tuple({**good, "x-warren-node": "10.1.1.2:25672"}.items()),  # token of another sender
                    tuple({**good, "x-warren-epoch": "6"}.items()),  # token of another epoch
                    tuple({**good, "x-warren-codec": "99"}.items()),
                ]
                for md in cases:
                    call = stub.Stream(metadata=md)
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await call.read()
                    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert b.stats.auth_failures == len(cases)
            assert got == []

    uvloop.run(main())


# -- mutual TLS -------------------------------------------------------------------------------------


def _make_ca(d, name):
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", d / f"{name}.key", "-out", d / f"{name}.pem", "-days", "2", "-subj", f"/CN={name}"],
        check=True, capture_output=True,
    )  # fmt: skip


def _make_cert(d, ca, name):
    subprocess.run(
        ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr", "-subj", f"/CN={name}"],
        check=True, capture_output=True,
    )  # fmt: skip
    ext = d / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", d / f"{name}.csr", "-CA", d / f"{ca}.pem", "-CAkey", d / f"{ca}.key",
         "-CAcreateserial", "-out", d / f"{name}.pem", "-days", "2", "-extfile", ext],
        check=True, capture_output=True,
    )  # fmt: skip
    return TlsConfig(cert_file=d / f"{name}.pem", key_file=d / f"{name}.key", ca_file=d / f"{ca}.pem")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_mutual_tls_admits_only_nodes_of_the_cluster_ca(tmp_path):
    _make_ca(tmp_path, "ca")
    _make_ca(tmp_path, "rogue-ca")
    tls_a = _make_cert(tmp_path, "ca", "a")
    tls_b = _make_cert(tmp_path, "ca", "b")
    tls_r = _make_cert(tmp_path, "rogue-ca", "r")

    async def main():
        ts = [
            NodeTransport(listen="127.0.0.1:0", secret=SECRET, tls=tls, options=FAST) for tls in (tls_a, tls_b, tls_r)
        ]
        a, b, r = ts
        try:
            for t in ts:
                await t.start()
            got = collect(b)
            a.add_peer(b.node_id)
            r.add_peer(b.node_id)  # right secret, wrong CA
            b.add_peer(r.node_id)
            await until(lambda: a.is_connected(b.node_id))
            assert a.send_node_message(b.node_id, "x", b"over tls")
            await until(lambda: got)
            await until(lambda: r.stats.connect_failures >= 2 and b.stats.connect_failures >= 2)
            assert not r.is_connected(b.node_id) and not b.is_connected(r.node_id)
            assert b.epoch_from(r.node_id) is None
            assert [p for _, _, p, _ in got] == [b"over tls"]
        finally:
            for t in ts:
                await t.close()

    uvloop.run(main())


# -- setup errors --------------------------------------------------------------------------------------


def test_start_fails_cleanly_on_a_busy_port_and_a_wildcard_needs_a_node_id():
    async def main():
        async with nodes(1, connect=False) as (a,):
            busy = NodeTransport(listen=f"127.0.0.1:{a.port}", secret=SECRET)
            with pytest.raises(OSError):
                await busy.start()
            await busy.close()
        with pytest.raises(ValueError):
            NodeTransport(listen="0.0.0.0:25672", secret=SECRET)
        with pytest.raises(ValueError):
            NodeTransport(listen="127.0.0.1:0", secret="")
        NodeTransport(listen="0.0.0.0:25672", secret=SECRET, node_id="node1.example:25672")

    uvloop.run(main())
