"""Raft replication for Warren: pysyncobj behind a durable journal, narrow patches,
explicit command records and the node-to-node transport."""

import socket as _socket

# pysyncobj's win_inet_pton (imported with the package) puts a Windows-only
# inet_ntop on the socket module on every OS, which then raises for every
# caller in the process (psutil's connection lists, say): put the real one back.
_inet_ntop = _socket.inet_ntop
import pysyncobj  # noqa: E402, F401

_socket.inet_ntop = _inet_ntop
