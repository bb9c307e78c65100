"""Background tasks with an owner: a failure is logged, and the owner's stop cancels them.

A task started with a bare `loop.create_task(...)` whose result is dropped has
no owner: the loop keeps only a weak reference to it, an exception in it is
reported, if ever, when it is garbage collected, and nothing cancels it when
the component that started it stops. So a component that works in the
background keeps a `BackgroundTasks`, `spawn`s its coroutines into it and
`cancel`s it when it stops (STYLE.md: every task has an owner; cancellation is
re-raised, other errors are logged). tests/test_layout.py refuses a dropped
`create_task` in node/.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["BackgroundTasks"]


class BackgroundTasks:
    """The tasks one component runs in the background; `log` hears their failures."""

    def __init__(self, loop: asyncio.AbstractEventLoop, log: logging.Logger) -> None:
        self._loop = loop
        self._log = log
        self._running: set[asyncio.Task[Any]] = set()  # a strong reference, which the loop does not keep
        self._cancelled = False

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any] | None:
        """Run `coro` as a task named `what` (its failure is logged as "`what` failed"); the task.

        After cancel() nothing more runs: the owner has stopped, and `coro` is closed unstarted (None).
        """
        if self._cancelled:
            coro.close()
            return None
        task = self._loop.create_task(coro, name=what)
        self._running.add(task)
        task.add_done_callback(self._finished)
        return task

    def cancel(self) -> None:
        """Cancel every task still running, and refuse new ones: the owner stops."""
        self._cancelled = True
        for task in list(self._running):
            task.cancel()

    def __len__(self) -> int:
        """How many tasks are running."""
        return len(self._running)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._log.error("%s failed", task.get_name(), exc_info=error)
