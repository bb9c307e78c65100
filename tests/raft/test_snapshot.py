"""The snapshot file and the durable rename pysyncobj uses for it."""

from __future__ import annotations

import os

import pysyncobj.serializer as stock_serializer
import pytest

from raft import patches
from raft.patches import durable_replace
from raft.snapshot import SnapshotError, read_snapshot, write_snapshot


def test_roundtrip(tmp_path):
    p = str(tmp_path / "snap")
    write_snapshot(p, (b"\x00x", 42, 3), (b"\x01", 41, 3), ["a:1", "b:2"], b"machine-state")
    s = read_snapshot(p)
    assert s.last == (b"\x00x", 42, 3) and s.prev == (b"\x01", 41, 3)
    assert s.cluster == ["a:1", "b:2"] and s.machine == b"machine-state"


@pytest.mark.parametrize("damage", ["flip", "truncate", "magic", "version"])
def test_damaged_file_is_refused(tmp_path, damage):
    p = tmp_path / "snap"
    write_snapshot(str(p), (b"\x00", 2, 1), (b"\x01", 1, 0), ["a"], b"x" * 100)
    data = bytearray(p.read_bytes())
    if damage == "flip":
        data[-5] ^= 1
    elif damage == "truncate":
        del data[-10:]
    elif damage == "magic":
        data[0:1] = b"X"
    else:
        data[7] = 9
    p.write_bytes(bytes(data))
    with pytest.raises(SnapshotError):
        read_snapshot(str(p))


def test_durable_replace_fsyncs_file_then_renames_then_fsyncs_dir(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(a, b):
        events.append("rename")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    (tmp_path / "f.tmp").write_bytes(b"new")
    durable_replace(str(tmp_path / "f.tmp"), str(tmp_path / "f"))
    assert events == ["fsync-file", "rename", "fsync-dir"]
    assert (tmp_path / "f").read_bytes() == b"new"


def test_pysyncobj_serializer_uses_the_durable_rename():
    # installed by patches.install(), which every SafeSyncObj runs (both the
    # compaction snapshot and the one received from a leader go through this name)
    patches.install()
    assert stock_serializer.atomicReplace is durable_replace
