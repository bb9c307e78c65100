"""Who may open a cluster stream: the shared secret, and TLS when configured.

Every stream a node opens to a peer carries, in its call metadata:

  x-warren-node   the sender's node id (its cluster address, "host:port")
  x-warren-epoch  the stream's epoch (decimal u64, strictly increasing per sender)
  x-warren-codec  the message codec version (raft/grpc_codec.py)
  x-warren-auth   hex HMAC-SHA256(secret, "warren-cluster-v1", sender, receiver, epoch)

The secret itself never travels: the token binds sender, receiver and epoch,
and the receiver only accepts an epoch above the last one it accepted from
that sender, so a captured token cannot open a second stream to the same
node while it runs. Without TLS the stream is still readable and
forgeable on the path; configure `TlsConfig` (mutual TLS: every node has a
certificate signed by the cluster CA and checks its peers' against it) for
confidentiality and integrity.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc

from .grpc_codec import CODEC_VERSION

__all__ = ["AuthError", "TlsConfig", "check_metadata", "stream_metadata", "stream_token"]

MD_NODE = "x-warren-node"
MD_EPOCH = "x-warren-epoch"
MD_CODEC = "x-warren-codec"
MD_AUTH = "x-warren-auth"
# Trailing metadata of a refusal for a stale epoch: the last accepted one,
# so a sender whose clock went back can jump past it (see grpc_link.py).
MD_LAST_EPOCH = "x-warren-last-epoch"

_U64_MAX = 2**64 - 1


class AuthError(Exception):
    """A stream whose metadata does not prove knowledge of the cluster secret."""


def _key(secret: bytes | str) -> bytes:
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    if not key:
        raise ValueError("the cluster secret must not be empty")
    return key


def stream_token(secret: bytes | str, sender: str, receiver: str, epoch: int) -> str:
    msg = b"\0".join((b"warren-cluster-v1", sender.encode(), receiver.encode(), str(epoch).encode()))
    return hmac.new(_key(secret), msg, hashlib.sha256).hexdigest()


def stream_metadata(secret: bytes | str, sender: str, receiver: str, epoch: int) -> tuple[tuple[str, str], ...]:
    return (
        (MD_NODE, sender),
        (MD_EPOCH, str(epoch)),
        (MD_CODEC, str(CODEC_VERSION)),
        (MD_AUTH, stream_token(secret, sender, receiver, epoch)),
    )


def check_metadata(secret: bytes | str, receiver: str, metadata: Iterable[tuple[str, str | bytes]]) -> tuple[str, int]:
    """(sender, epoch) of a stream opened to `receiver`, or raise AuthError."""
    md: dict[str, str] = {}
    for k, v in metadata:
        md[k] = v.decode("latin1") if isinstance(v, bytes) else v
    sender = md.get(MD_NODE)
    epoch_s = md.get(MD_EPOCH)
    token = md.get(MD_AUTH)
    if not sender or not epoch_s or not token:
        raise AuthError("missing cluster credentials")
    if md.get(MD_CODEC) != str(CODEC_VERSION):
        raise AuthError(f"codec version {md.get(MD_CODEC)!r}, this node speaks {CODEC_VERSION}")
    if not epoch_s.isdigit() or not 0 < int(epoch_s) <= _U64_MAX:
        raise AuthError("bad epoch")
    epoch = int(epoch_s)
    if not hmac.compare_digest(token, stream_token(secret, sender, receiver, epoch)):
        raise AuthError("bad cluster credentials")
    return sender, epoch


@dataclass(frozen=True)
class TlsConfig:
    """PEM files for mutual TLS between nodes.

    `server_name` overrides the name checked against a peer's certificate
    (by default the host part of the peer's node id).
    """

    cert_file: str | Path
    key_file: str | Path
    ca_file: str | Path
    server_name: str | None = None

    def _read(self) -> tuple[bytes, bytes, bytes]:
        return (Path(self.cert_file).read_bytes(), Path(self.key_file).read_bytes(), Path(self.ca_file).read_bytes())

    def server_credentials(self) -> grpc.ServerCredentials:
        cert, key, ca = self._read()
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        cert, key, ca = self._read()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
