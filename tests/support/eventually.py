"""Waiting on the running event loop for a condition to hold (tests/support/: shared by the
tests that drive real transports in their own loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(predicate: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    """Returns once `predicate()` is true; fails naming `what` after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"{what} never happened"
        await asyncio.sleep(0.005)
