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


def _declare_mixed(api) -> None:
    api.put("/api/vhosts/v2")
    for i in range(12):
        vhost = "%2F" if i % 3 else "v2"
        kind = ("classic", "quorum", "stream")[i % 3]
        api.put(f"/api/queues/{vhost}/m{i:02d}-{kind}", {"arguments": {"x-queue-type": kind}})


def _page_from_the_whole_list(api, query: dict) -> list:
    """What a page holds by the rules: the whole sorted list (no ?page=), filtered, sliced."""
    sort = "".join(f"&{k}={query[k]}" for k in ("sort", "sort_reverse") if k in query)
    items = api.get(f"/api/queues?columns=name,vhost,type{sort}").body
    name = query.get("name", "")
    items = [q for q in items if name in q["name"]]
    size, page = int(query.get("page_size", 100)), int(query["page"])
    return items[(page - 1) * size : page * size]


def test_a_queue_page_sorted_by_name_vhost_or_type_builds_only_its_queues(api, node, monkeypatch):
    """The page is what the whole list says (costly_list_response), and only its queues' JSON is made."""
    _declare_mixed(api)
    from node.http import formats

    built = []
    real = formats.queue_json
    monkeypatch.setattr(
        formats, "queue_json", lambda queue, *a, **kw: built.append(queue.name) or real(queue, *a, **kw)
    )
    for query in ({"page": 1, "page_size": 5}, {"page": 2, "page_size": 5, "sort": "name"},
                  {"page": 1, "page_size": 4, "sort": "vhost", "sort_reverse": "true"},
                  {"page": 3, "page_size": 2, "sort": "type"}, {"page": 1, "page_size": 3, "name": "quorum"}):  # fmt: skip
        built.clear()
        params = "&".join(f"{k}={v}" for k, v in query.items())
        r = api.get(f"/api/queues?{params}&columns=name,vhost,type").body
        assert len(built) == r["item_count"] <= query["page_size"], query
        assert r["total_count"] == 12
        assert r["items"] == _page_from_the_whole_list(api, query), query
    built.clear()
    r = api.get("/api/queues?page=1&page_size=5&sort=messages&columns=name").body
    assert len(built) == 12 and r["item_count"] == 5  # a sort on a count needs every queue's
    built.clear()
    assert api.get("/api/queues/v2?page=1&page_size=2").body["filtered_count"] == 4 and len(built) == 2
