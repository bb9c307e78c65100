"""A small persistent (copy-on-write) map for the metadata state.

`MetadataState` must stay unchanged when `apply` derives the next state from
it, yet copying a vhost's whole queue dict on every declare would make
declaring n queues cost O(n^2). A `PMap` is a fixed two-level trie of 32 x 32
leaves, each leaf a small dict; `set` and `discard` copy one root tuple, one
branch tuple and one leaf, so a change costs O(32 + n/1024) whatever the size.

Determinism (STYLE.md rule 4): slots are chosen by CRC-32 of the key, never
by Python's per-process randomised `hash`, so iteration order (slot order,
then insertion order inside a leaf) is the same on every member. Rebuilding a
map from its own iteration order (`PMap(m.items())`, what a snapshot restore
does) gives the same order again, so a restored member keeps producing
byte-identical snapshots.

Keys are strings or tuples of strings.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["PMap"]

K = TypeVar("K")
V = TypeVar("V")

_BITS = 5
_FAN = 1 << _BITS
_MASK = _FAN - 1
_EMPTY_ROOT: tuple = (None,) * _FAN


def _slot(key: Any) -> int:
    if isinstance(key, str):
        data = key
    elif isinstance(key, tuple):
        data = "\x00".join(key)
    else:
        raise TypeError(f"PMap keys are str or tuples of str, not {type(key).__name__}")
    return zlib.crc32(data.encode("utf-8", "surrogatepass"))


class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping whose `set`/`discard` return a new map."""

    __slots__ = ("_root", "_len")

    _root: tuple
    _len: int

    def __init__(self, items: Iterable[tuple[K, V]] | Mapping[K, V] = ()) -> None:
        if isinstance(items, Mapping):
            items = items.items()
        root: list[list[dict | None] | None] = [None] * _FAN
        n = 0
        for key, value in items:
            h = _slot(key)
            branch = root[h & _MASK]
            if branch is None:
                branch = root[h & _MASK] = [None] * _FAN
            leaf = branch[(h >> _BITS) & _MASK]
            if leaf is None:
                leaf = branch[(h >> _BITS) & _MASK] = {}
            if key not in leaf:
                n += 1
            leaf[key] = value
        self._root = tuple(None if b is None else tuple(b) for b in root)
        self._len = n

    @classmethod
    def _make(cls, root: tuple, n: int) -> PMap[K, V]:
        m = cls.__new__(cls)
        m._root = root
        m._len = n
        return m

    # -- reading --------------------------------------------------------------

    def _leaf(self, key: Any) -> dict | None:
        h = _slot(key)
        branch = self._root[h & _MASK]
        return None if branch is None else branch[(h >> _BITS) & _MASK]

    def __getitem__(self, key: K) -> V:
        leaf = self._leaf(key)
        if leaf is None:
            raise KeyError(key)
        return leaf[key]

    def get(self, key: K, default: Any = None) -> Any:
        leaf = self._leaf(key)
        return default if leaf is None else leaf.get(key, default)

    def __contains__(self, key: object) -> bool:
        try:
            leaf = self._leaf(key)
        except TypeError:
            return False
        return leaf is not None and key in leaf

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        for branch in self._root:
            if branch is not None:
                for leaf in branch:
                    if leaf:
                        yield from leaf

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        for branch in self._root:
            if branch is not None:
                for leaf in branch:
                    if leaf:
                        yield from leaf.items()

    def values(self) -> Iterator[V]:  # type: ignore[override]
        for branch in self._root:
            if branch is not None:
                for leaf in branch:
                    if leaf:
                        yield from leaf.values()

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"

    # -- deriving ---------------------------------------------------------------

    def set(self, key: K, value: V) -> PMap[K, V]:
        """A map with `key` bound to `value` (an existing key keeps its place)."""
        h = _slot(key)
        i, j = h & _MASK, (h >> _BITS) & _MASK
        branch = self._root[i]
        leaf = None if branch is None else branch[j]
        new_leaf = {} if leaf is None else dict(leaf)
        n = self._len if key in new_leaf else self._len + 1
        new_leaf[key] = value
        new_branch = list(_EMPTY_ROOT if branch is None else branch)
        new_branch[j] = new_leaf
        root = list(self._root)
        root[i] = tuple(new_branch)
        return self._make(tuple(root), n)

    def discard(self, key: K) -> PMap[K, V]:
        """A map without `key` (this map itself if it had none)."""
        h = _slot(key)
        i, j = h & _MASK, (h >> _BITS) & _MASK
        branch = self._root[i]
        leaf = None if branch is None else branch[j]
        if leaf is None or key not in leaf:
            return self
        new_leaf: dict | None = dict(leaf)
        del new_leaf[key]
        new_branch = list(branch)
        new_branch[j] = new_leaf or None
        root = list(self._root)
        root[i] = None if all(b is None for b in new_branch) else tuple(new_branch)
        return self._make(tuple(root), self._len - 1)

    def update(self, pairs: Iterable[tuple[K, V]]) -> PMap[K, V]:
        m = self
        for key, value in pairs:
            m = m.set(key, value)
        return m


EMPTY: PMap = PMap()
