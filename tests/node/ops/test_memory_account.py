"""The memory alarm's limit and inputs without a node: cgroup limits, the
absolute setting, malloc_trim, and the alarms' reading of them."""

from __future__ import annotations

import psutil

from node.ops.alarms import Alarms
from node.ops.memory import available_memory, malloc_trim, memory_limit

RAM = psutil.virtual_memory().total


def _limit_file(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text + "\n")
    return str(path)


def test_a_cgroup_limit_below_the_ram_is_the_memory_available(tmp_path):
    v2 = _limit_file(tmp_path, "memory.max", str(512 * 1024 * 1024))
    assert available_memory((v2,)) == (512 * 1024 * 1024, v2)


def test_no_cgroup_limit_means_the_ram(tmp_path):
    unlimited_v2 = _limit_file(tmp_path, "memory.max", "max")
    unlimited_v1 = _limit_file(tmp_path, "memory.limit_in_bytes", "9223372036854771712")
    assert available_memory((unlimited_v2, unlimited_v1, str(tmp_path / "missing"))) == (RAM, "ram")


def test_the_watermark_is_a_fraction_or_bytes():
    assert memory_limit(123_456_789) == 123_456_789
    assert abs(memory_limit(0.6) - 0.6 * available_memory()[0]) < 2


def test_malloc_trim_is_available_on_glibc():
    assert malloc_trim()  # the test image is glibc-based; elsewhere it is a no-op returning False


def test_the_alarms_compare_what_they_are_given(tmp_path):
    changes: list[bool] = []
    used = [0]
    full = [False]
    alarms = Alarms(str(tmp_path), 1000, 0, changes.append, memory_used=lambda: used[0], store_full=lambda: full[0])
    alarms.check()
    assert not alarms.active and changes == []
    used[0] = 1001
    alarms.check()
    assert alarms.describe() == ["memory"] and changes == [True]
    used[0] = 10
    full[0] = True  # a store write waits for space: a disk alarm whatever the free space says
    alarms.check()
    assert alarms.describe() == ["disk"] and alarms.memory_used == 10
    full[0] = False
    alarms.check()
    assert not alarms.active and changes == [True, False]
