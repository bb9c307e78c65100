"""Issue 14, rows 7 and 12: what an administrator sends is bounded; a bad
input is a 400 with a reason, never a 500 or a frozen node."""

from __future__ import annotations


def test_a_permission_pattern_re2_cannot_run_is_refused(api):
    body = {"configure": ".*", "write": ".*", "read": "(a)\\1"}
    r = api.put("/api/permissions/%2F/guest", body)
    assert r.status == 400 and r.body["error"] == "bad_request"
    assert "backreferences" in r.body["reason"]
    assert api.put("/api/permissions/%2F/guest", dict(body, read="^amq\\.gen.*|(a+)+$")).status == 204
