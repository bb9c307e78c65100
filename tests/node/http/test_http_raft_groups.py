"""GET /api/raft/groups (node/http/raft_routes.py): every replicated group the node
knows, the metadata group first, one page at a time, with leader, term, commit
index and each member's match index and lag where this node leads."""

from __future__ import annotations

import time

import pytest
from mgmt_client import Api


def _wait_for_leaders(api: Api) -> None:
    deadline = time.monotonic() + 15
    while api.get("/api/health/checks/quorum-queues-without-elected-leaders/all-vhosts/").status != 200:
        assert time.monotonic() < deadline, "a quorum queue has no leader"
        time.sleep(0.05)


@pytest.fixture
def node(broker_factory):
    """No snapshot writer: it reads every group's status on its own timer (test_only_the_pages_groups_are_read)."""
    return broker_factory(http_port=0, metrics_port=0, snapshot_interval=0)


@pytest.fixture
def groups_node(node, api):
    for name in ("qq-a", "qq-b", "qq-c"):
        assert api.put(f"/api/queues/%2F/{name}", {"arguments": {"x-queue-type": "quorum"}}).status == 201
    assert api.put("/api/queues/%2F/st", {"arguments": {"x-queue-type": "stream"}}).status == 201
    assert api.put("/api/queues/%2F/classic").status == 201  # not replicated: never listed
    _wait_for_leaders(api)
    return node


def test_lists_the_metadata_group_then_each_quorum_queue_and_stream(groups_node, api):
    page = api.get("/api/raft/groups").body
    assert page["total_count"] == page["filtered_count"] == page["item_count"] == 5 and page["page_count"] == 1
    kinds = [(g["type"], g["queue"]) for g in page["items"]]
    assert kinds == [("metadata", None), ("quorum", "qq-a"), ("quorum", "qq-b"), ("quorum", "qq-c"), ("stream", "st")]
    meta = page["items"][0]
    assert meta["name"] == "metadata" and meta["role"] == "leader" and meta["leader"] == "warren@test"
    assert meta["term"] >= 1 and meta["commit_index"] >= 1 and meta["local"] is True
    [me] = meta["members"]
    assert me["node"] == "warren@test" and me["self"] and me["leader"] and me["reachable"]
    assert me["match_index"] == meta["last_index"] and me["lag"] == 0
    qq = page["items"][1]
    assert qq["name"].startswith("qq.") and qq["vhost"] == "/" and qq["leader"] == "warren@test"
    assert qq["term"] >= 1 and qq["commit_index"] >= 1 and qq["members"][0]["lag"] == 0
    st = page["items"][4]
    assert st["name"] == "st" and st["leader"] == "warren@test" and st["term"] >= 1  # the stream's epoch


def test_a_quorum_queues_commit_index_moves_with_its_log(groups_node, api):
    def commit() -> int:
        [qq] = api.get("/api/raft/groups?type=quorum&name=qq-a").body["items"]
        return qq["commit_index"]

    before = commit()
    assert api.post("/api/exchanges/%2F/amq.default/publish", {"routing_key": "qq-a", "payload": "x",
                                                               "payload_encoding": "string", "properties": {}}).status == 200  # fmt: skip
    assert commit() > before


def test_pages_filters_and_types(groups_node, api):
    page = api.get("/api/raft/groups?type=quorum&page_size=2&page=2").body
    assert page["filtered_count"] == 3 and page["page_count"] == 2 and page["page"] == 2
    assert [g["queue"] for g in page["items"]] == ["qq-c"]
    assert [g["queue"] for g in api.get("/api/raft/groups?name=QQ-B").body["items"]] == ["qq-b"]
    assert [g["type"] for g in api.get("/api/raft/groups?type=metadata").body["items"]] == ["metadata"]
    assert [g["queue"] for g in api.get("/api/raft/groups?type=stream").body["items"]] == ["st"]


@pytest.mark.parametrize("query, error", [
    ("page=0", "invalid_pagination_parameters"), ("page_size=501", "invalid_pagination_parameters"),
    ("page=x", "bad_request"), ("type=classic", "bad_request"), ("page=9", "page_out_of_range"),
])  # fmt: skip
def test_bad_queries_are_400(groups_node, api, query, error):
    r = api.get(f"/api/raft/groups?{query}")
    assert r.status == 400 and r.body["error"] == error


def test_needs_a_monitoring_user(node, api):
    node.add_user("mgmt", "pw", ("management",))
    r = api.as_user("mgmt", "pw").get("/api/raft/groups")
    assert r.status == 401 and r.body["error"] == "not_authorised"
    node.add_user("mon", "pw", ("monitoring",))
    assert api.as_user("mon", "pw").get("/api/raft/groups").status == 200


def test_only_the_pages_groups_are_read(groups_node, api, monkeypatch):
    from raft.group import RaftGroup

    read = []
    status = RaftGroup.status
    monkeypatch.setattr(RaftGroup, "status", lambda self: read.append(self) or status(self))
    page = api.get("/api/raft/groups?type=quorum&page_size=1&page=3").body
    assert [g["queue"] for g in page["items"]] == ["qq-c"] and page["page_count"] == 3
    assert len(read) == 1  # one group's status of the four this node hosts
