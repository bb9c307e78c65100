"""The process of a node with several workers (issue 36, docs/architecture.md
"Workers"): it starts each worker, restarts one that dies, and stops them all.

It is small on purpose and runs no event loop, no store and no thread: it
starts workers as fresh interpreters (never a `fork()` of a process holding
uvloop, RocksDB or threads), waits for signals with `sigtimedwait`, and reaps
with `waitpid`. What it promises:

- Worker 0 starts first, the others once it says it is ready (SIGUSR1, sent
  when its metadata is caught up and it lets them follow): before that they
  could only wait for it, taking the CPU it starts with (a 3-node cluster of
  2-worker nodes came up in 4.3 s with all started at once, 2.6 s with one).
- A worker that exits is started again after a backoff (0, 1, 2, 5 s by
  default, by how many times it exited in the last 30 s), while the others
  keep serving.
- A worker K >= 1 that exits 3 times within 30 s is lost: it stays down, the
  supervisor adds it to the list at `lost` (a JSON list, written by atomic
  rename) and tells worker 0 (SIGUSR2, once worker 0 is ready), which moves
  its queues to the others (lost_workers.py). The list is the supervisor's
  run's only: a node started again starts every worker.
- Worker 0 exiting 3 times within 30 s is a node that cannot run: the
  supervisor stops the others and exits 70 (EX_SOFTWARE) for the service
  manager to restart the node, as a node crash does.
- A worker that exits with 69 (EX_UNAVAILABLE) or 78 (EX_CONFIG) said a
  restart will not help (node/main.py): the node stops with that code.
- SIGTERM or SIGINT stops the node: each worker gets SIGTERM, then SIGKILL
  after `grace` seconds; SIGHUP is passed on (TLS reload).
- Each worker has PR_SET_PDEATHSIG = SIGKILL: a supervisor killed with -9
  takes its workers down with it, never leaving them without a parent that
  restarts them."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

__all__ = ["EX_SOFTWARE", "LOST", "READY", "Supervisor", "lost_path"]

log = logging.getLogger("warren.workers")

EX_SOFTWARE = 70
FINAL_EXITS = (69, 78)  # EX_UNAVAILABLE, EX_CONFIG: the worker says a restart will not help
BACKOFF = (0.0, 1.0, 2.0, 5.0)
GIVE_UP = (3, 30.0)  # exits within seconds
_PR_SET_PDEATHSIG = 1
_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1}
READY = signal.SIGUSR1  # from worker 0: the others may start
LOST = signal.SIGUSR2  # to worker 0: the list of lost workers grew


def lost_path(data_dir: str) -> str:
    """Where the supervisor of the node in `data_dir` lists its lost workers."""
    return os.path.join(data_dir, "workers", "lost")


def _child_setup(parent: int) -> None:
    """In the worker between fork and exec: its own signal mask, and death with its parent."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


class Supervisor:
    """Runs `commands[k]` as worker k until stopped; `run()` returns the node's exit status."""

    def __init__(self, commands: Sequence[Sequence[str]], env: Mapping[str, str] | None = None, *,
                 backoff: Sequence[float] = BACKOFF, give_up: tuple[int, float] = GIVE_UP,
                 grace: float = 30.0, lost: str | None = None) -> None:  # fmt: skip
        """`lost`: where the list of lost workers goes (None: a lost worker stops the node)."""
        self._commands = [list(c) for c in commands]
        self._lost_path = lost
        self._lost: set[int] = set()
        self._ready = False  # worker 0 said READY since it last started: it handles LOST
        self._env = dict(env) if env is not None else None
        self._backoff = tuple(backoff)
        self._give_up = give_up
        self._grace = grace
        self._procs: dict[int, subprocess.Popen] = {}  # worker -> its live process
        self._exits: dict[int, list[float]] = {k: [] for k in range(len(self._commands))}
        self._due: dict[int, float] = {}  # worker -> when to start it again

    def run(self) -> int:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        self._write_lost()  # none yet: an earlier run's list is not this one's
        self._start(0)
        status = self._serve()
        self._stop_all()
        return status

    def _start(self, k: int) -> None:
        env = dict(self._env if self._env is not None else os.environ, WARREN_WORKER=str(k))
        parent = os.getpid()
        proc = subprocess.Popen(self._commands[k], env=env, preexec_fn=lambda: _child_setup(parent))
        self._procs[k] = proc
        self._ready = self._ready and k != 0
        log.info("worker %d started, pid %d", k, proc.pid)

    def _serve(self) -> int:
        while True:
            now = time.monotonic()
            for k, when in list(self._due.items()):
                if when <= now:
                    del self._due[k]
                    self._start(k)
            wait = min(self._due.values(), default=now + 3600.0) - now
            info = signal.sigtimedwait(_SIGNALS, max(wait, 0.0))
            if info is None:
                continue
            if info.si_signo in (signal.SIGTERM, signal.SIGINT):
                log.info("stopping the node's workers (%s)", signal.Signals(info.si_signo).name)
                return 0
            if info.si_signo == signal.SIGHUP:
                for proc in self._procs.values():
                    proc.send_signal(signal.SIGHUP)
                continue
            if info.si_signo == READY:
                self._start_the_others()
                continue
            status = self._reap()
            if status is not None:
                return status

    def _start_the_others(self) -> None:
        """Worker 0 is ready: start each other worker not running, waiting out a backoff or lost."""
        self._ready = True
        if self._lost:  # lost while worker 0 was starting: it may have read the list before
            self._tell_lost()
        for k in range(1, len(self._commands)):
            if k not in self._procs and k not in self._due and k not in self._lost:
                self._start(k)

    def _write_lost(self) -> None:
        if self._lost_path is None:
            return
        os.makedirs(os.path.dirname(self._lost_path), exist_ok=True)
        tmp = self._lost_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(sorted(self._lost), f)
        os.replace(tmp, self._lost_path)

    def _tell_lost(self) -> None:
        proc = self._procs.get(0)
        if proc is not None and self._ready:
            proc.send_signal(LOST)

    def _reap(self) -> int | None:
        """Note each worker that exited; a node's exit status when one cannot go on."""
        for k, proc in list(self._procs.items()):
            code = proc.poll()
            if code is None:
                continue
            del self._procs[k]
            now = time.monotonic()
            recent = [t for t in self._exits[k] if now - t < self._give_up[1]] + [now]
            self._exits[k] = recent
            if code in FINAL_EXITS:
                log.error("worker %d exited with %d: stopping the node", k, code)
                return code
            if len(recent) >= self._give_up[0]:
                if k == 0 or self._lost_path is None:
                    log.error("worker %d exited %d times in %.0f s (last status %d): stopping the node",
                              k, len(recent), self._give_up[1], code)  # fmt: skip
                    return EX_SOFTWARE
                log.error("worker %d exited %d times in %.0f s (last status %d): it stays down until the node "
                          "restarts, and its queues move to the other workers", k, len(recent), self._give_up[1],
                          code)  # fmt: skip
                self._lost.add(k)
                self._write_lost()
                self._tell_lost()
                continue
            delay = self._backoff[min(len(recent) - 1, len(self._backoff) - 1)]
            log.warning("worker %d exited with %d; starting it again in %.1f s", k, code, delay)
            self._due[k] = now + delay
        return None

    def _stop_all(self) -> None:
        self._due.clear()
        for proc in self._procs.values():
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self._grace
        for k, proc in self._procs.items():
            try:
                proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                log.error("worker %d did not stop in %.0f s: killed", k, self._grace)
                proc.kill()
                proc.wait()
        self._procs.clear()
