"""The reachability graph of one snapshot window, in plain Python (stdlib only:
Spark ships this function to its Python workers).

Each node present in the window says which other members it reaches. Two nodes
are connected when each reports reaching the other; a report one way only is an
asymmetry (a one-way partition, or a report from before the other side noticed).
"""

from __future__ import annotations

from collections.abc import Iterable


def components(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Connected components by union-find: each sorted, the list sorted by first member."""
    parent: dict[str, str] = {n: n for n in nodes}

    def find(x: str) -> str:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        if a not in parent or b not in parent:
            continue
        ra, rb = find(a), find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            parent[rb] = ra
    groups: dict[str, list[str]] = {}
    for n in parent:
        groups.setdefault(find(n), []).append(n)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


def window_graph(reports: Iterable[tuple[str, Iterable[str] | None]]) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """(components, asymmetric pairs) of one window from (node, nodes it reaches) reports.
    An asymmetric pair (a, b): a reaches b, b is present and does not report reaching a."""
    reach: dict[str, set[str]] = {}
    for node, reached in reports:
        reach.setdefault(node, set()).update(r for r in (reached or ()) if r != node)
    edges = []
    asym = []
    for a, out in reach.items():
        for b in out:
            if b not in reach:
                continue  # b did not report in this window: nothing to compare with
            if a in reach[b]:
                if a < b:
                    edges.append((a, b))
            else:
                asym.append((a, b))
    return components(reach, edges), sorted(asym)


def signature(comps: list[list[str]], silent: list[str]) -> str:
    """A string equal for two windows exactly when their topology is the same."""
    return "|".join(",".join(c) for c in comps) + "#" + ",".join(silent)


def window_row(w: int, reports: list, first_seen: dict[str, int]) -> tuple:
    """The per-window Spark UDF body. `reports` are (node, reach, carried) rows; a
    carried row is a node's record from an earlier window (it wrote none in this one).
    A carried node counts as present only if a node that did report reaches it (or
    nobody reported afresh): otherwise it is silent, for a node that wrote nothing
    and that nobody reaches is gone, whatever the reason. Its edges come from the
    fresh reports alone (its own list is old), and it is in no asymmetric pair.

    Returns (components, asymmetric pairs, silent nodes, present nodes, bridged pairs):
    silent are the nodes seen in an earlier window that are not present in this one;
    bridged pairs (`bridged`) come from the fresh reports alone."""
    fresh = {r[0]: set(r[1] or ()) for r in reports if not r[2]}
    old = {r[0]: set(r[1] or ()) for r in reports if r[2] and r[0] not in fresh}
    if fresh:
        old = {n: reach for n, reach in old.items() if any(n in f for f in fresh.values())}
    pairs = list(fresh.items())
    for n in old:  # a carried node reaches whoever reaches it, and is reached back by them
        if fresh:
            old[n] = {m for m, f in fresh.items() if n in f} | {m for m in old[n] if m in old}
        pairs.append((n, old[n]))
    comps, asym = window_graph(pairs)
    asym = [a for a in asym if a[0] not in old and a[1] not in old]
    present = set(fresh) | set(old)
    silent = sorted(n for n, first in first_seen.items() if first <= w and n not in present)
    return comps, [list(a) for a in asym], silent, sorted(present), [list(p) for p in bridged(fresh, comps)]


def bridged(reach: dict[str, set[str]], comps: list[list[str]]) -> list[tuple[str, str]]:
    """Pairs (a, b), a < b, of one component that do not reach each other either way: a
    partition bridged by a node that reaches both sides, which components alone cannot show
    (every node reaches someone who reaches the rest). From fresh reports only."""
    side = {n: i for i, comp in enumerate(comps) for n in comp}
    nodes = sorted(reach)
    return [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]
            if side.get(a) == side.get(b) and b not in reach[a] and a not in reach[b]]  # fmt: skip
