"""Certificates for TLS tests, made by scripts/gen-certs.sh (openssl), and
the client side of a TLS handshake with the standard library."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from amqp import definitions as d
from amqp.framing import SASL_HEADER, Frame, FrameParser, ProtocolHeader

REPO = Path(__file__).resolve().parents[2]
GEN_CERTS = REPO / "scripts" / "gen-certs.sh"
CLIENT_CN = "tls-client"
CLIENT_DN = f"CN={CLIENT_CN},OU=clients,O=Warren"  # the client certificate's subject, RFC 4514


@dataclass
class Certs:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")

    def server_settings(self, verify: str) -> dict:
        """Broker settings for TLS with these files."""
        return {"tls_cert": self.path("server.pem"), "tls_key": self.path("server.key"), "tls_ca": self.ca,
                "tls_verify": verify}  # fmt: skip

    def client_context(self, client: str | None = "client") -> ssl.SSLContext:
        """Trusts the CA; presents `client`.pem (none when None)."""
        ctx = ssl.create_default_context(cafile=self.ca)
        if client is not None:
            ctx.load_cert_chain(self.path(f"{client}.pem"), self.path(f"{client}.key"))
        return ctx

    def renew_server(self, common_name: str) -> None:
        """A new server certificate and key under the same CA, written over the old files."""
        make(self.dir, SERVER_CN=common_name, only_server=True)


def make(out: Path, only_server: bool = False, **env: str) -> Certs:
    if only_server:
        for name in ("server.pem", "server.key"):
            (out / name).unlink(missing_ok=True)
        work = out.parent / (out.name + ".renew")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        for name in ("ca.pem", "ca.key", "other-ca.pem", "other-ca.key"):
            shutil.copy(out / name, work / name)
        subprocess.run(["bash", str(GEN_CERTS), str(work)], check=True, capture_output=True, env=_env(env))
        for name in ("server.pem", "server.key"):
            shutil.copy(work / name, out / name)
        return Certs(out)
    subprocess.run(["bash", str(GEN_CERTS), str(out)], check=True, capture_output=True, env=_env(env))
    return Certs(out)


def _env(extra: dict) -> dict:
    return dict(os.environ, **extra)


class Refused(Exception):
    """The server ended the TLS handshake (or the connection right after it)."""


def sasl_mechanisms(port: int, ctx: ssl.SSLContext, host: str = "localhost") -> list[str]:
    """Handshakes with `ctx`, sends the SASL header and returns the
    mechanisms the node offers; raises Refused when the server refuses the
    handshake (with TLS 1.3 the client learns it on its first read)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname=host) as tls:
                tls.sendall(SASL_HEADER)
                parser, items = FrameParser(), []
                while len(items) < 2:
                    data = tls.recv(65536)
                    if not data:
                        raise Refused("closed")
                    parser.feed(data)
                    while (item := parser.next()) is not None:
                        items.append(item)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
            raise Refused(str(e)) from None
    header, frame = items[0], items[1]
    assert isinstance(header, ProtocolHeader) and header.raw == SASL_HEADER
    assert isinstance(frame, Frame) and isinstance(frame.performative, d.SaslMechanisms)
    return [str(m) for m in frame.performative.sasl_server_mechanisms]


def server_certificate_cn(port: int, ca: str) -> str:
    """The CN of the certificate the server presents in a new handshake."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            subject = tls.getpeercert()["subject"]
    return next(value for rdn in subject for name, value in rdn if name == "commonName")
