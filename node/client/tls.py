"""TLS for the client listeners (AMQPS, HTTPS): the server's SSL context, its
reload without dropping connections, and the client certificate's subject
for SASL EXTERNAL.

A listener's SSL context is fixed when the listener starts, so the one the
listeners hold (`TlsContexts.listening`) only dispatches: its SNI callback,
which OpenSSL calls early in every handshake (with or without a server
name), moves the handshake to the current context. `reload()` builds a new
context from the files and swaps it in; handshakes already done keep theirs.
"""

from __future__ import annotations

import logging
import ssl
from typing import Any

log = logging.getLogger("warren.tls")

VERIFY_MODES = {
    "none": ssl.CERT_NONE,  # no client certificate asked for
    "peer": ssl.CERT_OPTIONAL,  # asked for; one that does not verify fails the handshake
    "require": ssl.CERT_REQUIRED,  # and a client without one is refused (RabbitMQ's fail_if_no_peer_cert)
}
LOGIN_FROM = ("distinguished_name", "common_name")


class TlsError(ValueError):
    """The TLS settings or files are unusable."""


def server_context(cert: str, key: str, ca: str, verify: str) -> ssl.SSLContext:
    """A TLS 1.2/1.3 server context from PEM files."""
    if verify not in VERIFY_MODES:
        raise TlsError(f"tls_verify must be one of {', '.join(VERIFY_MODES)}, not {verify!r}")
    if verify != "none" and not ca:
        raise TlsError(f"tls_verify={verify} needs tls_ca, the authority that signs client certificates")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
        if ca:
            ctx.load_verify_locations(cafile=ca)
    except (OSError, ssl.SSLError) as e:
        raise TlsError(f"cannot load the TLS certificate {cert!r}, key {key!r} or CA {ca!r}: {e}") from None
    ctx.verify_mode = VERIFY_MODES[verify]
    return ctx


class TlsContexts:
    """The node's TLS configuration: one context for every TLS listener,
    reloadable from the same files."""

    def __init__(self, cert: str, key: str, ca: str, verify: str):
        self.cert, self.key, self.ca, self.verify = cert, key, ca, verify
        self.current = server_context(cert, key, ca, verify)
        self.listening = server_context(cert, key, ca, verify)
        self.listening.sni_callback = self._choose
        self.reloads = 0

    @classmethod
    def from_config(cls, cfg: Any) -> TlsContexts | None:
        """None when TLS is not configured (no tls_cert)."""
        if not cfg.tls_cert:
            return None
        if not cfg.tls_key:
            raise TlsError("tls_cert needs tls_key")
        if cfg.ssl_cert_login_from not in LOGIN_FROM:
            raise TlsError(f"ssl_cert_login_from must be one of {', '.join(LOGIN_FROM)}, "
                           f"not {cfg.ssl_cert_login_from!r}")  # fmt: skip
        return cls(cfg.tls_cert, cfg.tls_key, cfg.tls_ca, cfg.tls_verify)

    def _choose(self, ssl_object: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        ssl_object.context = self.current

    def reload(self) -> None:
        """Reads the files again; new handshakes use them, connections
        already open are untouched. Raises TlsError, keeping the old
        context, when the new files do not load."""
        self.current = server_context(self.cert, self.key, self.ca, self.verify)
        self.reloads += 1
        log.info("TLS certificate %s and key reloaded", self.cert)


# Attribute names in a distinguished name as RabbitMQ prints them; others as
# Python names them.
_SHORT_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "domainComponent": "DC",
    "streetAddress": "STREET",
    "userId": "UID",
    "emailAddress": "emailAddress",
    "serialNumber": "serialNumber",
    "givenName": "GN",
    "surname": "SN",
    "title": "title",
}


def _escape(value: str) -> str:
    """RFC 4514 escaping of one attribute value."""
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and len(out) > 1:
        out = out[:-1] + "\\ "
    return out


def distinguished_name(peercert: dict) -> str:
    """The subject as RabbitMQ's ssl_cert_login_from = distinguished_name
    gives it: RFC 4514, the most specific RDN first ("CN=c,OU=x,O=y")."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn))
    return ",".join(rdns)


def common_name(peercert: dict) -> str | None:
    """The subject's CN (the first one, as RabbitMQ)."""
    for rdn in peercert.get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return value
    return None


def login_name(peercert: dict | None, login_from: str) -> str | None:
    """The user a verified client certificate logs in as with SASL EXTERNAL,
    or None when there is none (no certificate, or not verified)."""
    if not peercert:
        return None
    if login_from == "common_name":
        return common_name(peercert)
    return distinguished_name(peercert) or None
