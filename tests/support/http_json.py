"""A JSON request to a node's HTTP API, with urllib only (the cluster and chaos
harnesses run where the test venv's extras may not be)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class HttpError(Exception):
    def __init__(self, status: int, body: Any):
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


def request_json(url: str, method: str, authorization: str, body: Any = None, timeout: float = 10.0) -> Any:
    """The decoded JSON reply (None when empty); HttpError with the decoded
    body (or its text) for a 4xx/5xx."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", authorization)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw.decode(errors="replace")
        raise HttpError(e.code, parsed) from None
    return json.loads(raw) if raw.strip() else None
