"""A periodic job that cannot die: whatever one run raises is logged and
remembered, and the next run is armed in `finally`, so one EMFILE or a
vanished directory costs one period, never the job (issue 14: an alarm timer
re-armed only on success stopped for good). `failing` and `last_error` let
a health check report the job as unhealthy while it fails."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("warren.periodic")
LOG_EVERY = 100  # after the first failure in a row, log one in this many


class Periodic:
    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float, job: Callable[[], None], name: str):
        self.loop = loop
        self.interval = interval
        self.job = job
        self.name = name
        self.runs = 0
        self.failures = 0  # in a row; 0 after a run that succeeded
        self.last_error: str | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._stopped = False

    @property
    def failing(self) -> bool:
        return self.failures > 0

    def start(self) -> None:
        """Runs the job now, then every `interval` seconds."""
        self._stopped = False
        self._run()

    def stop(self) -> None:
        self._stopped = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _run(self) -> None:
        self._handle = None
        try:
            self.job()
        except Exception as e:
            self.failures += 1
            self.last_error = f"{type(e).__name__}: {e}"
            if self.failures == 1 or self.failures % LOG_EVERY == 0:
                log.exception("%s failed (%d in a row)", self.name, self.failures)
        else:
            if self.failures:
                log.warning("%s works again after %d failures", self.name, self.failures)
            self.failures = 0
            self.last_error = None
        finally:
            self.runs += 1
            if not self._stopped:
                self._handle = self.loop.call_later(self.interval, self._run)
