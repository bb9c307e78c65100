"""How a cluster operation fails (node/cluster/cluster.py); the HTTP API maps these to statuses."""

from __future__ import annotations

__all__ = [
    "ClusterError",
    "ClusterUnavailable",
    "CommitTimeout",
    "MembershipError",
    "NoQuorum",
    "OutcomeUnknown",
]


class ClusterError(Exception):
    """A cluster operation that failed."""


class ClusterUnavailable(ClusterError):
    """Nothing could be committed in time (HTTP 503)."""


class NoQuorum(ClusterUnavailable):
    def __init__(self, reachable: int, members: int) -> None:
        super().__init__(f"cluster has no majority: {reachable} of {members} members reachable")
        self.reachable, self.members = reachable, members


class CommitTimeout(ClusterUnavailable):
    """A majority is reachable but the command did not commit in time (an election, a slow disk)."""


class OutcomeUnknown(ClusterUnavailable):
    """The leader changed while a non-idempotent command was in flight; it may or may not have committed."""


class MembershipError(ClusterError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status the API answers with
