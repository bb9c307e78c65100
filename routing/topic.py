"""Topic exchange matching: a trie of binding-key words, walked as an NFA.

Words are separated by '.'; in a binding key `*` matches exactly one word and
`#` matches zero or more. Only a whole word is special (`a*` is a literal).
Empty words are words ("a..b" has three), but the empty key has none: that is
RabbitMQ's split_topic_key, so `#` matches "" while `*` does not.

Why a trie walked as a set of active states rather than one regex per binding
or RabbitMQ's recursive descent: the cost of a match is bounded by
words x trie states whatever the number of bindings, and patterns such as
`#.#.#` cannot blow up exponentially because each (node, position) pair is
visited once.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

D = TypeVar("D", bound=Hashable)

STAR = "*"
HASH = "#"


def split_words(key: str) -> list[str]:
    """RabbitMQ's split_topic_key: "" has zero words, "a." has two."""
    return key.split(".") if key else []


class _Node:
    __slots__ = ("children", "star", "hash", "is_hash", "dests")

    def __init__(self, is_hash: bool = False):
        self.children: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.hash: _Node | None = None
        # A node reached through a '#' edge may absorb any number of words.
        self.is_hash = is_hash
        # destination -> number of bindings ending here for it (the same
        # destination can be bound twice with other arguments)
        self.dests: dict = {}

    def is_empty(self) -> bool:
        return not (self.dests or self.children or self.star or self.hash)


def _add_closure(node: _Node, active: set[_Node]) -> None:
    """Add `node` and the '#' children reachable from it without consuming
    a word ('#' may match zero words)."""
    while node is not None and node not in active:
        active.add(node)
        node = node.hash


class TopicTrie(Generic[D]):
    """Binding keys -> destinations. bind/unbind count duplicates, so one
    unbind removes one bind."""

    def __init__(self) -> None:
        self._root = _Node()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def bind(self, binding_key: str, dest: D) -> None:
        node = self._root
        for word in split_words(binding_key):
            node = self._child(node, word)
        node.dests[dest] = node.dests.get(dest, 0) + 1
        self._size += 1

    def unbind(self, binding_key: str, dest: D) -> bool:
        """Remove one binding of `dest` under `binding_key`; False if absent.
        Prunes the nodes left empty so the trie does not grow forever."""
        path: list[tuple[_Node, str]] = []
        node = self._root
        for word in split_words(binding_key):
            child = self._find_child(node, word)
            if child is None:
                return False
            path.append((node, word))
            node = child
        count = node.dests.get(dest)
        if count is None:
            return False
        if count == 1:
            del node.dests[dest]
        else:
            node.dests[dest] = count - 1
        self._size -= 1
        while path and node.is_empty():
            parent, word = path.pop()
            self._drop_child(parent, word)
            node = parent
        return True

    def match(self, routing_key: str) -> set[D]:
        active: set[_Node] = set()
        _add_closure(self._root, active)
        for word in split_words(routing_key):
            following: set[_Node] = set()
            for node in active:
                if node.is_hash:
                    _add_closure(node, following)
                child = node.children.get(word)
                if child is not None:
                    _add_closure(child, following)
                if node.star is not None:
                    _add_closure(node.star, following)
            if not following:
                return set()
            active = following
        result: set[D] = set()
        for node in active:
            if node.dests:
                result.update(node.dests)
        return result

    @staticmethod
    def _find_child(node: _Node, word: str) -> _Node | None:
        if word == HASH:
            return node.hash
        if word == STAR:
            return node.star
        return node.children.get(word)

    @staticmethod
    def _child(node: _Node, word: str) -> _Node:
        if word == HASH:
            if node.hash is None:
                node.hash = _Node(is_hash=True)
            return node.hash
        if word == STAR:
            if node.star is None:
                node.star = _Node()
            return node.star
        child = node.children.get(word)
        if child is None:
            child = node.children[word] = _Node()
        return child

    @staticmethod
    def _drop_child(node: _Node, word: str) -> None:
        if word == HASH:
            node.hash = None
        elif word == STAR:
            node.star = None
        else:
            del node.children[word]


def topic_matches(binding_key: str, routing_key: str) -> bool:
    """One-off match of a single binding key (tests, management previews)."""
    trie: TopicTrie[bool] = TopicTrie()
    trie.bind(binding_key, True)
    return bool(trie.match(routing_key))
