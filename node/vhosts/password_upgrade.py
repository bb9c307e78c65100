"""Users imported from RabbitMQ keep its salted SHA-256 hash until they first
log in; then the node stores Warren's own hash of the password instead."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from metadata import commands as mc
from node.vhosts.metadata_store import new_key
from routing.users import hash_password

if TYPE_CHECKING:
    import asyncio

    from node.vhosts.metadata_store import MetadataStore
    from routing.users import Authenticator


class RehashNode(Protocol):
    """What the upgrade uses of its node; `metadata` is None until the node has started."""

    auth: Authenticator
    loop: asyncio.AbstractEventLoop
    metadata: MetadataStore | None

    def background(self, coro: Any, what: str) -> None: ...


def rehash_password(node: RehashNode, name: str, password: str) -> None:
    """`name` just logged in with a RabbitMQ hash: propose Warren's hash of
    `password` in its place (any thread may call: the hashing is slow on
    purpose and runs on the caller's thread, the proposal on the loop)."""
    user = node.auth.users.get(name)
    if user is None:
        return
    legacy = user.password_hash
    new_hash = hash_password(password)

    def propose() -> None:
        user = node.auth.users.get(name)
        if user is None or user.password_hash != legacy or node.metadata is None:
            return  # changed or deleted meanwhile: nothing to upgrade
        command = mc.PutUser(new_key(), name, new_hash, tuple(user.tags))
        node.background(node.metadata.run(command), f"rehashing the password of user '{name}'")

    node.loop.call_soon_threadsafe(propose)
