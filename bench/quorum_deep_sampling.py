"""What bench/quorum_deep.py samples every second: per-process memory and CPU from /proc,
disk use, API latency (`Prober`), queue depth (`DepthPoller`) and the sampler thread."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.parse
from typing import Any

MIB = 1 << 20


def proc_status(pid: int) -> dict[str, int] | None:
    """VmRSS, VmHWM, RssAnon, RssFile of a process in bytes; None when it is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[key] = int(rest.split()[0]) * 1024
    except OSError:
        return None
    return out


def proc_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def tree_pids(pid: int) -> list[int]:
    """pid and all its descendants (from /proc/*/stat ppid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def du(path: str) -> int:
    """Bytes allocated on disk under path (st_blocks, as du does)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


# --------------------------------------------------------------------------- brokers


class Prober(threading.Thread):
    """GET `path` on node i back to back (`pause` s between answers); records
    (start offset, answer seconds or None on an error)."""

    def __init__(self, broker: Any, i: int, t0: float, stop: threading.Event, pause: float,
                 path: str = "/api/overview", timeout: float = 300.0):  # fmt: skip
        super().__init__(daemon=True, name=f"probe-{i}")
        self.broker, self.i, self.t0, self.stop_event, self.pause = broker, i, t0, stop, pause
        self.path, self.timeout = path, timeout
        self.records: list[tuple[float, float | None]] = []
        self.inflight: float | None = None  # start of the request now waiting

    def run(self) -> None:
        while not self.stop_event.is_set():
            if not self.broker.alive(self.i):
                self.stop_event.wait(0.5)
                continue
            start = time.monotonic()
            self.inflight = start
            try:
                self.broker.http_get(self.i, self.path, timeout=self.timeout)
                took: float | None = time.monotonic() - start
            except Exception:  # noqa: BLE001  (refused while restarting, a timeout)
                took = None
            self.inflight = None
            self.records.append((round(start - self.t0, 3), None if took is None else round(took, 4)))
            self.stop_event.wait(self.pause if took is not None else 0.5)

    def waiting(self) -> float:
        """Age of the request in flight, 0 when none."""
        start = self.inflight
        return 0.0 if start is None else time.monotonic() - start


class DepthPoller(threading.Thread):
    """Every `period` s, the depth (ready + unacknowledged) of `queue` as node i reports it."""

    def __init__(self, broker: Any, i: int, queue: str, stop: threading.Event, period: float = 1.0):
        super().__init__(daemon=True, name=f"depth-{i}")
        self.broker, self.i, self.queue, self.stop_event, self.period = broker, i, queue, stop, period
        self.depth: int | None = None
        self.info: dict = {}

    def run(self) -> None:
        while not self.stop_event.is_set():
            if self.broker.alive(self.i):
                try:
                    info = self.broker.http_get(self.i, f"/api/queues/%2F/{urllib.parse.quote(self.queue, safe='')}", timeout=60)
                    self.info = info or {}
                    self.depth = int(info.get("messages", 0) or 0)
                except Exception:  # noqa: BLE001
                    self.depth = None
            else:
                self.depth = None
            self.stop_event.wait(self.period)


class Sampler(threading.Thread):
    """Every `interval` s, one record for the whole cluster (see the module docstring)."""

    def __init__(self, broker: Any, t0: float, stop: threading.Event, interval: float,
                 depth: list[DepthPoller], probes: list[Prober], rss_limit: int, out: Any = None):  # fmt: skip
        super().__init__(daemon=True, name="sampler")
        self.broker, self.t0, self.stop_event, self.interval = broker, t0, stop, interval
        self.depth, self.probes, self.rss_limit, self.out = depth, probes, rss_limit, out
        self.phase = "start"
        self.samples: list[dict] = []
        self.snap_writes: list[list[tuple[float, int]]] = [[] for _ in range(broker.n)]  # (t, size)
        self._snap_seen: list[dict[str, float]] = [{} for _ in range(broker.n)]
        self.over_limit: str | None = None
        self.abort = threading.Event()

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            try:
                self.sample()
            except Exception as e:  # noqa: BLE001
                print(f"[deep] sampler: {type(e).__name__}: {e}", file=sys.stderr)
            next_at += self.interval
            self.stop_event.wait(max(0.0, next_at - time.monotonic()))

    def sample(self) -> dict:
        now = time.monotonic()
        rec: dict[str, Any] = {"t": round(now - self.t0, 2), "phase": self.phase, "load1": os.getloadavg()[0],
                               "nodes": []}  # fmt: skip
        for i in range(self.broker.n):
            node: dict[str, Any] = {"alive": self.broker.alive(i)}
            pids = self.broker.pids(i)
            stats = [s for s in (proc_status(p) for p in pids) if s]
            if stats:
                node["rss"] = sum(s.get("VmRSS", 0) for s in stats)
                node["hwm"] = max(s.get("VmHWM", 0) for s in stats)  # the biggest process's own peak
                node["anon"] = sum(s.get("RssAnon", 0) for s in stats)
                node["cpu"] = round(sum(c for c in (proc_cpu(p) for p in pids) if c is not None), 2)
            node["disk"] = du(self.broker.data_dir(i))
            node["log_disk"] = du(self.broker.log_dir(i))
            snap_size, newest = 0, 0.0
            for path in self.broker.snapshot_files(i):
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                snap_size += st.st_size
                newest = max(newest, st.st_mtime)
                seen = self._snap_seen[i]
                if seen.get(path) != st.st_mtime:
                    seen[path] = st.st_mtime
                    # wall-clock mtime -> our monotonic offset
                    self.snap_writes[i].append((round(st.st_mtime - time.time() + now - self.t0, 2), st.st_size))
            node["snap"] = snap_size
            node["depth"] = self.depth[i].depth
            node["probe_wait"] = round(self.probes[i].waiting(), 3)
            rec["nodes"].append(node)
            if node.get("rss", 0) > self.rss_limit and self.over_limit is None:
                self.over_limit = f"node {i} RSS {node['rss'] / MIB:.0f} MiB > limit {self.rss_limit / MIB:.0f} MiB"
                print(f"[deep] {self.over_limit}: stopping", file=sys.stderr)
                self.abort.set()
        self.samples.append(rec)
        if self.out is not None:
            self.out.write(json.dumps(rec) + "\n")
            self.out.flush()
        return rec


# --------------------------------------------------------------------------- the run
