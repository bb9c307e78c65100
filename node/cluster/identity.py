"""Who this node is in the cluster, and what it keeps on disk to stay so.

A node's id is "advertise_host:grpc_port", the address its peers dial and
its name in every Raft group; it must not change across restarts, so the
data directory remembers it in <data_dir>/cluster/members.json, with the
last membership seen, and a node started under another id refuses to run.
With grpc_port 0 a node takes a free port on its first boot and the
remembered one afterwards (the id must be known before the port is bound).
A node started without a cluster secret generates one and keeps it in
<data_dir>/cluster/secret (like Erlang's cookie).
"""

from __future__ import annotations

import json
import os
import secrets
import socket

from node.cluster.errors import ClusterError

__all__ = ["MEMBERS_FORMAT", "NodeIdentity", "default_advertise_host", "free_port", "seed_naming_this_node"]

MEMBERS_FORMAT = 1


class NodeIdentity:
    """This node's id and the files under <data_dir>/cluster that pin it."""

    def __init__(self, data_dir: str, advertise_host: str) -> None:
        self.data_dir = data_dir
        self.dir = os.path.join(data_dir, "cluster")
        self.advertise_host = advertise_host
        self.node_id = ""
        self.saved_members: list[str] = []  # the membership last written to members.json
        self._members_file = os.path.join(self.dir, "members.json")

    def choose(self, port: int, listen_host: str) -> str:
        """Settle this node's id: `port`, else the remembered one, else a free one (port 0)."""
        os.makedirs(self.dir, exist_ok=True)
        port = port or self._remembered_port() or free_port(listen_host)
        self.node_id = f"{self.advertise_host}:{port}"
        return self.node_id

    @property
    def port(self) -> int:
        return int(self.node_id.rpartition(":")[2])

    def load_members(self) -> list[str] | None:
        """The remembered membership, or None on a blank node; refuses another node's files."""
        doc = self._read_members_file()
        if doc is None:
            return None
        if doc.get("format") != MEMBERS_FORMAT:
            raise ClusterError(f"{self._members_file}: format {doc.get('format')}, this Warren reads {MEMBERS_FORMAT}")
        if doc.get("node") != self.node_id:
            raise ClusterError(f"{self.data_dir} holds the cluster state of node {doc.get('node')}, but this node's"
                               f" cluster id is {self.node_id}: advertise_host:grpc_port must not change")  # fmt: skip
        self.saved_members = sorted(doc["members"])
        return list(self.saved_members)

    def save_members(self, members: list[str]) -> None:
        """Write the membership durably (a crash leaves the old file or the new one)."""
        tmp = self._members_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"format": MEMBERS_FORMAT, "node": self.node_id, "members": members}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._members_file)
        _fsync_dir(self.dir)
        self.saved_members = list(members)

    def load_or_make_secret(self) -> str:
        """A node started without a secret keeps a generated one (like Erlang's cookie)."""
        path = os.path.join(self.dir, "secret")
        try:
            with open(path) as f:
                return f.read().strip()
        except FileNotFoundError:
            pass
        secret = secrets.token_hex(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret)
        return secret

    def _read_members_file(self) -> dict | None:
        try:
            with open(self._members_file) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def _remembered_port(self) -> int | None:
        doc = self._read_members_file()
        host, _, port = str((doc or {}).get("node", "")).rpartition(":")
        return int(port) if host == self.advertise_host and port.isdigit() else None


def default_advertise_host(listen_host: str) -> str:
    if listen_host in ("", "0.0.0.0", "::", "[::]"):
        return socket.getfqdn()
    return listen_host


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host.strip("[]") or "0.0.0.0", 0))
        return s.getsockname()[1]


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def seed_naming_this_node(seeds: list[str], port: int) -> str | None:
    """The seed that is this node under some name ("127.0.0.1:25672" for a
    node advertised as "localhost:25672"): same port, and a host whose
    address this machine owns (a socket binds to it). None if no seed is."""
    if port <= 0:
        return None
    for seed in seeds:
        host, _, seed_port = seed.rpartition(":")
        if seed_port.isdigit() and int(seed_port) == port and _is_local(host.strip("[]")):
            return seed
    return None


def _is_local(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:  # a peer's name not resolvable yet is not this node
        return False
    for family, _, _, _, addr in infos:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((addr[0], 0))
            return True
        except OSError:
            continue
    return False
