"""The node's door to the metadata: commit a command and get its result once
this node has applied it (read your writes), with refusals raised as the
routing layer's errors so that every caller (the /management node, the HTTP
API, the AMQP handler) maps them as it maps any routing error.

    MetadataStore(machine, propose)
      propose: the metadata Raft group's `Cluster.propose` on a node; an
      in-process apply for tools and unit tests (`MetadataStore.local`)

A command that cannot commit (no majority, no leader in time) raises
`MetadataUnavailable`: HTTP 503, management 503, and on AMQP the condition
amqp:resource-limit-exceeded with a description saying why.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from amqp.errors import Condition, SessionError
from metadata import limits
from metadata.effects import Created, Error, Result
from metadata.machine import MetadataMachine
from metadata.state import MetadataState
from node.cluster.cluster import ClusterError
from routing.errors import InvalidArgument, RoutingError

__all__ = ["MetadataRefused", "MetadataStore", "MetadataUnavailable", "new_key"]


class MetadataRefused(RoutingError):
    """The metadata machine refused the command; carries its AMQP condition."""

    def __init__(self, condition: str, description: str):
        SessionError.__init__(self, condition, description)


class MetadataUnavailable(RoutingError):
    """Nothing could be committed: the cluster has no majority or no leader in time."""

    condition_code = Condition.RESOURCE_LIMIT_EXCEEDED


def new_key() -> str:
    """A fresh idempotency key: a retry of the same proposal reuses it."""
    return uuid.uuid4().hex


class MetadataStore:
    def __init__(self, machine: MetadataMachine, propose: Callable[[Any], Awaitable[Any]]):
        self.machine = machine
        self._propose = propose

    @classmethod
    def local(cls, machine: MetadataMachine | None = None) -> MetadataStore:
        """A store of one node without Raft: each command is applied at once
        (no durability; for tools and unit tests)."""
        machine = machine if machine is not None else MetadataMachine()
        index = [machine.last_index]

        async def apply(command: Any) -> Any:
            index[0] += 1
            return machine.apply(command, index[0])

        return cls(machine, apply)

    @property
    def state(self) -> MetadataState:
        return self.machine.state

    async def run(self, command: Any) -> Result:
        """Commit `command`; returns Ok or Created, raises MetadataRefused or
        MetadataUnavailable, or InvalidArgument for a name or value out of
        bounds (metadata/limits.py)."""
        try:
            limits.check_command(command)
        except limits.Invalid as e:
            raise InvalidArgument(str(e)) from None
        try:
            result = await self._propose(command)
        except ClusterError as e:
            raise MetadataUnavailable(f"metadata change not committed: {e}") from None
        if isinstance(result, Error):
            raise MetadataRefused(result.condition, result.description)
        if result is None:  # the record reached no machine: a bug, not the client's fault
            raise MetadataRefused(Condition.INTERNAL_ERROR, f"{type(command).__name__} was applied to nothing")
        return result

    async def created(self, command: Any) -> bool:
        """Commit `command`; True when it created something."""
        return isinstance(await self.run(command), Created)
