"""The garbage collector's settings a node applies once started (node/ops/gc_settings.py),
checked in a fresh interpreter: they are process-wide, so the test process is left alone."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

_PROBE = r"""
import gc, json, sys
sys.path.insert(0, sys.argv[1])
from node.ops.gc_settings import apply_gc_settings

class Node:  # start-up's long-lived objects, in a cycle (never freed by reference counting)
    def __init__(self):
        self.me = self

kept = [Node() for _ in range(1000)]
default = gc.get_threshold()
applied = apply_gc_settings(int(sys.argv[2]))
tracked = len(gc.get_objects())  # frozen objects are no longer in any generation
print(json.dumps({"applied": applied, "default": default, "threshold": gc.get_threshold(),
                  "frozen": gc.get_freeze_count(), "tracked": tracked}))
"""


def probe(threshold: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, REPO, str(threshold)], capture_output=True, text=True,
                         check=True, timeout=60)  # fmt: skip
    return json.loads(out.stdout)


def test_start_up_objects_are_frozen_and_young_collections_come_less_often():
    r = probe(10_000)
    assert r["threshold"] == [10_000, *r["default"][1:]]
    assert r["frozen"] >= 1000 and r["tracked"] < r["frozen"]  # full collections skip what start-up made
    assert r["applied"] == {"gen0_threshold": 10_000, "frozen_objects": r["frozen"]}


def test_zero_keeps_pythons_defaults():
    r = probe(0)
    assert r["applied"] == {} and r["threshold"] == r["default"] and r["frozen"] == 0
