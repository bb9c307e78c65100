"""Small process and port helpers shared by the benchmark scripts.

Every broker process the benchmarks start goes through :func:`spawn`, which puts
it in its own process group and registers it, so that :func:`cleanup_all`
(run at exit and on SIGTERM/SIGHUP/Ctrl-C) can stop the whole group.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time

_live: list[subprocess.Popen] = []
_handlers_installed = False

# A Warren node's default is one worker per usable core; the benchmarks' Warren rows are one
# process unless a script asks for workers (bench/workers.py passes --workers).
os.environ.setdefault("WARREN_WORKERS", "1")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def listeners(port: int) -> str:
    """Human-readable description of whoever listens on a TCP port (for errors)."""
    try:
        out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True,
                             timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "(unknown process)"


def require_free(host: str, port: int, what: str) -> None:
    if port_open(host, port, timeout=0.3):
        raise RuntimeError(f"port {port} ({what}) is already in use: {listeners(port)}")


def _on_signal(signum, frame):  # pragma: no cover - exercised by hand
    # Turn SIGTERM/SIGHUP into SystemExit so that finally blocks and atexit run.
    raise SystemExit(128 + signum)


def install_handlers() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(cleanup_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    # A process started in the background by a non-interactive shell inherits
    # SIGINT ignored; make Ctrl-C / kill -INT raise KeyboardInterrupt regardless.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def spawn(cmd: list[str], *, env: dict | None = None, log_path: str | None = None,
          cwd: str | None = None) -> subprocess.Popen:
    """Start cmd in a new session (own process group), stdout+stderr to log_path."""
    install_handlers()
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if log_path:
            out.close()
    _live.append(proc)
    return proc


def stop(proc: subprocess.Popen, *, term_timeout: float = 20.0, sig: int = signal.SIGTERM) -> int | None:
    """Send sig to proc (the group leader only), wait, then SIGKILL its whole group.

    Only the leader gets the first signal: signalling the whole group of an Erlang
    VM would also stop its port helpers (erl_child_setup) and turn a graceful
    shutdown into a crash.
    """
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = proc.pid
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(term_timeout)
        except subprocess.TimeoutExpired:
            print(f"[bench] pid {proc.pid} ignored signal {sig}; killing its group", file=sys.stderr)
    # Kill stragglers in the group (e.g. erl_child_setup, inet_gethost) and the leader if alive.
    _killpg(pgid, signal.SIGKILL)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass
    if proc in _live:
        _live.remove(proc)
    return proc.returncode


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cleanup_all() -> None:
    for proc in list(_live):
        stop(proc, term_timeout=10.0)


def wait_for(pred, timeout: float, what: str, *, proc: subprocess.Popen | None = None,
             interval: float = 0.2, log_path: str | None = None) -> None:
    """Poll pred() until true; fail early if proc exits; raise with log tail on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with code {proc.returncode}{log_tail(log_path)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready after {timeout:.0f} s{log_tail(log_path)}")
        time.sleep(interval)


def log_tail(path: str | None, lines: int = 30) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        tail = f.readlines()[-lines:]
    return f"\n--- last lines of {path} ---\n" + "".join(tail)
