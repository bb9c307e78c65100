"""README.md stays true: its first lines are the title and the two set-up commands, it
says which protocols are not served, and the quick start's Python blocks, run as they
are (the node's port put in for 5672) against a `warren server` process, publish and
consume the messages they print; the node's banner names the console and the login."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mgmt_client import NodeProcess

README = Path(__file__).resolve().parents[1] / "README.md"
pytestmark = pytest.mark.timeout(120)


def quick_start_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_the_readme_opens_with_the_title_and_the_set_up_commands():
    lines = README.read_text().splitlines()
    assert lines[0] == "# Warren"
    assert [line.split()[:2] for line in lines[1:5] if line.strip()] == [["make", "run"], ["make", "test"]]
    text = README.read_text()
    assert "AMQP 0-9-1" in text and "MQTT" in text and "STOMP" in text
    assert "`amqp://host:5672//queues/NAME`" in text


@pytest.fixture(scope="module")
def readme_node(tmp_path_factory):
    node = NodeProcess(tmp_path_factory.mktemp("readme-node"))
    yield node
    node.stop()


def test_the_banner_names_the_console_and_the_default_login(readme_node):
    console = readme_node.proc.stdout.readline().strip()
    login = readme_node.proc.stdout.readline().strip()
    assert console == f"web console: http://127.0.0.1:{readme_node.http_port}/"
    assert login == "log in as guest / guest (from this machine only: a loopback user)"


def test_the_quick_start_runs(readme_node):
    blocks = quick_start_blocks()
    assert len(blocks) == 2 and all("localhost:5672" in b for b in blocks)
    printed = []
    for block in blocks:
        code = block.replace("localhost:5672", f"localhost:{readme_node.amqp_port}")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        printed.append(done.stdout.strip())
    assert printed == ["Hello, Warren!", "Hello from proton!"]
    assert len(blocks[0].splitlines()) <= 22 and len(blocks[1].splitlines()) <= 10  # a quick start stays short
