"""A small tmpfs mounted for a test, to fill a filesystem for real (ENOSPC).

Needs CAP_SYS_ADMIN (root in the test container); `mount_tmpfs` skips the
test, saying why, where mounting is not permitted."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def mount_tmpfs(path: str | os.PathLike[str], size: int) -> Iterator[str]:
    """Mount a tmpfs of `size` bytes at `path` (created) for the block."""
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root / CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], check=False)


def fill(directory: str, leave: int = 0) -> str:
    """Write a filler file until the filesystem has at most `leave` bytes
    free; returns its path (delete it to give the space back)."""
    filler = os.path.join(directory, "filler")
    chunk = b"\0" * (256 * 1024)
    with open(filler, "wb") as f:
        try:
            while os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize > leave + len(chunk):
                f.write(chunk)
                f.flush()
            f.write(chunk[: max(0, os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize - leave)])
            f.flush()
        except OSError:
            pass  # full already
    return filler
