"""The host a StreamQueue asks for the time and its timers, for the in-process stream benchmarks
(stream_log.py, stream_sql_filter.py, replicated_log.py): the wall clock and the running loop."""

from __future__ import annotations

import asyncio
import time


class Host:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_s, fn):
        return asyncio.get_running_loop().call_later(delay_s, fn)
