"""Fixtures for the management tests: a real node (the thread-hosted
BrokerThread of tests/broker/conftest.py) with its HTTP API and Prometheus
endpoint on ephemeral ports, a client for the API (mgmt_client.py), and
`warren server` in a child process for the `warren ctl` tests.

tests/broker/conftest.py is loaded by path under its own module name: with
--import-mode=importlib, `from conftest import ...` would not find it, and
this directory is put on sys.path so that tests can import mgmt_client.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from mgmt_client import Api, NodeProcess  # noqa: E402

_BROKER_CONFTEST = _HERE.parent / "broker" / "conftest.py"
_spec = importlib.util.spec_from_file_location("warren_tests_broker_fixtures", _BROKER_CONFTEST)
_fixtures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _fixtures
_spec.loader.exec_module(_fixtures)

BrokerThread = _fixtures.BrokerThread
make_config = _fixtures.make_config
broker_factory = _fixtures.broker_factory  # re-exported fixture


@pytest.fixture
def node(broker_factory) -> BrokerThread:
    return broker_factory(http_port=0, metrics_port=0)


@pytest.fixture
def api(node) -> Api:
    return Api(node.broker.http_port)


@pytest.fixture(scope="module")
def node_process(tmp_path_factory):
    p = NodeProcess(tmp_path_factory.mktemp("ctl-node"))
    yield p
    p.stop()
