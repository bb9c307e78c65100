"""A build that does not support a feature flag enabled on its data refuses
to start, names the flag, and leaves the data as it was
(node/cluster/enabled_flags.py). The older build is simulated by the test
knob that makes a node report flags unsupported; the cluster-tests upgrade
scenario does the same with the previous release's image."""

from __future__ import annotations

import json
import os
import subprocess

from mgmt_client import REPO, Api, NodeProcess, server_command

from metadata.feature_flags import FLAGS, STREAM_QUEUE
from node.cluster.enabled_flags import FILE_NAME
from node.cluster.machine import UNSUPPORTED_FLAGS_ENV


def test_a_build_without_an_enabled_flag_refuses_the_data_and_leaves_it_intact(tmp_path):
    data = tmp_path / "data"
    node = NodeProcess(data)
    try:
        assert Api(node.http_port).put("/api/queues/%2F/kept", {"durable": True}).status in (201, 204)
    finally:
        node.stop()
    recorded = json.loads((data / FILE_NAME).read_text())
    assert set(recorded["enabled"]) == set(FLAGS.default_enabled())  # a fresh cluster enables every stable flag
    before = sorted(p.name for p in data.iterdir())

    older = subprocess.run(server_command(data, "--enable-test-faults"), cwd=REPO, capture_output=True, text=True,
                           timeout=60, env={**os.environ, UNSUPPORTED_FLAGS_ENV: STREAM_QUEUE})  # fmt: skip
    assert older.returncode == 78, older.stderr[-2000:]
    assert "refusing to start" in older.stderr and STREAM_QUEUE in older.stderr
    assert "listening" not in older.stdout
    assert sorted(p.name for p in data.iterdir()) == before  # it opened nothing

    again = NodeProcess(data)  # the build that wrote the data still runs on it
    try:
        assert Api(again.http_port).get("/api/queues/%2F/kept").status == 200
    finally:
        again.stop()


def test_data_from_a_build_before_the_file_starts(tmp_path):
    data = tmp_path / "data"
    node = NodeProcess(data)
    node.stop()
    (data / FILE_NAME).unlink()  # as a 0.1.0 data directory: no file at all
    again = NodeProcess(data)
    try:
        assert json.loads((data / FILE_NAME).read_text())["enabled"]  # rewritten from the metadata
    finally:
        again.stop()

