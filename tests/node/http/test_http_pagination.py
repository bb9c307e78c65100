"""Pagination, name filters and sorting of list routes, as RabbitMQ's
rabbit_mgmt_util: ?page= turns a listing into a page object."""

from __future__ import annotations


def test_queues_page_filter_and_regex(api, node):
    for name in ("qa1", "qa2", "qb1", "other"):
        api.put(f"/api/queues/%2F/{name}")
    assert [q["name"] for q in api.get("/api/queues?name=q").body] == ["other", "qa1", "qa2", "qb1"]  # no page: all
    r = api.get("/api/queues?page=1&page_size=2&name=q").body
    assert {k: v for k, v in r.items() if k != "items"} == {"total_count": 4, "item_count": 2, "filtered_count": 3,
                                                            "page": 1, "page_size": 2, "page_count": 2}  # fmt: skip
    assert [q["name"] for q in r["items"]] == ["qa1", "qa2"]
    r = api.get("/api/queues/%2F?page=2&page_size=2&name=q").body
    assert [q["name"] for q in r["items"]] == ["qb1"] and r["item_count"] == 1
    r = api.get("/api/queues?page=1&name=^Q.1$&use_regex=true&columns=name").body
    assert r["items"] == [{"name": "qa1"}, {"name": "qb1"}] and r["page_size"] == 100
    r = api.get("/api/queues?page=1&sort=name&sort_reverse=true&columns=name").body
    assert [q["name"] for q in r["items"]] == ["qb1", "qa2", "qa1", "other"]
    assert api.get("/api/queues?page=1&name=zzz").body["items"] == []


def test_bad_pagination_is_400(api, node):
    for query, error in (("page=0", "invalid_pagination_parameters"), ("page=1&page_size=501",
                         "invalid_pagination_parameters"), ("page=x", "bad_request"),
                         ("page=9&page_size=1", "page_out_of_range"),
                         ("page=1&name=(&use_regex=true", "bad_request")):  # fmt: skip
        r = api.get(f"/api/queues?{query}")
        assert (r.status, r.body["error"]) == (400, error), query


def test_other_listings_page(api, node):
    api.put("/api/vhosts/v2")
    for path in ("/api/vhosts", "/api/exchanges", "/api/exchanges/%2F", "/api/bindings", "/api/connections",
                 "/api/vhosts/%2F/connections"):  # fmt: skip
        r = api.get(f"{path}?page=1&page_size=1")
        assert r.status == 200 and set(r.body) >= {"items", "page_count", "total_count"}, path
    assert api.get("/api/vhosts?page=1&name=v2").body["items"][0]["name"] == "v2"
    assert isinstance(api.get("/api/users?page=1").body, list)  # not a paging route in RabbitMQ


def test_sort_by_a_nested_field(api, node):
    api.put("/api/queues/%2F/s1")
    api.put("/api/queues/%2F/s2")
    node.call(lambda: None)
    rows = api.get("/api/queues?sort=message_stats.publish&columns=name").body
    assert {r["name"] for r in rows} == {"s1", "s2"}
