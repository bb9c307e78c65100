"""Docker health check of a Warren node: exit 0 when the node's management API answers
/api/health/checks/alarms with 200 (the node runs, no memory or disk alarm), 1 otherwise.

    python healthcheck.py            # the node runs without alarms
    python healthcheck.py --cluster  # ... and its metadata Raft group knows a leader

It reads the node's settings as the node does (the TOML file at $WARREN_CONFIG_FILE or
/etc/warren/warren.toml, then WARREN_* variables) for the HTTP port and the default user,
and asks over loopback, where even the loopback-only `guest` may log in. With plain HTTP
off it asks over HTTPS, trusting tls_ca and presenting the node's own certificate (which
tls_verify=require asks for).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import urllib.request

from node.config import load


def main(argv: list[str]) -> int:
    path = os.environ.get("WARREN_CONFIG_FILE", "/etc/warren/warren.toml")
    cfg = load(path if os.path.isfile(path) else None)
    base, tls = f"http://127.0.0.1:{cfg.http_port}", None
    if cfg.http_port < 0 and cfg.tls_cert and cfg.https_port > 0:
        base = f"https://localhost:{cfg.https_port}"
        tls = ssl.create_default_context(cafile=cfg.tls_ca or None)
        tls.load_cert_chain(cfg.tls_cert, cfg.tls_key)
    elif cfg.http_port <= 0:
        return 0  # no management listener to ask: the process is alive, that is all we know
    auth = base64.b64encode(f"{cfg.default_user}:{cfg.default_password}".encode()).decode()

    def get(api_path: str) -> dict:
        req = urllib.request.Request(base + api_path)
        req.add_header("Authorization", "Basic " + auth)
        with urllib.request.urlopen(req, timeout=3, context=tls) as resp:
            return json.loads(resp.read() or b"{}")

    try:
        get("/api/health/checks/alarms")
        if "--cluster" in argv and cfg.grpc_port >= 0 and not get("/api/cluster").get("leader"):
            print("no metadata leader known", file=sys.stderr)
            return 1
    except Exception as e:  # any failure is "unhealthy"; say why in `docker inspect`
        print(f"unhealthy: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
