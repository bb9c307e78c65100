"""Topic matching: the trie against a regex reference written from the rules
(RabbitMQ's split_topic_key: "" has no word, empty words count)."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routing.topic import TopicTrie, split_words, topic_matches


def reference_match(binding_key: str, routing_key: str) -> bool:
    """Each word of the key is written ".word"; "*" is one such group, "#" any
    number of them, a literal word itself."""
    subject = "".join("." + word for word in split_words(routing_key))
    parts = []
    for word in split_words(binding_key):
        if word == "*":
            parts.append(r"\.[^.]*")
        elif word == "#":
            parts.append(r"(?:\.[^.]*)*")
        else:
            parts.append(r"\." + re.escape(word))
    return re.fullmatch("".join(parts), subject) is not None


CASES = [
    ("a.b.c", "a.b.c", True),
    ("a.b.c", "a.b", False),
    ("a.*.c", "a.b.c", True),
    ("a.*.c", "a.c", False),
    ("a.#.c", "a.c", True),
    ("a.#.c", "a.b.b.c", True),
    ("#", "", True),
    ("#", "a.b", True),
    ("*", "", False),  # the empty key has zero words
    ("*", "a", True),
    ("*", "a.b", False),
    ("", "", True),
    ("", "a", False),
    ("a.*", "a.", True),  # "a." is "a" and an empty word
    ("a..b", "a..b", True),
    ("a.*.b", "a..b", True),
    ("*.*", ".", True),
    ("#.#", "a", True),
    ("#.*", "", False),
    ("#.*", "a.b.c", True),
    ("a*", "ab", False),  # only whole words are wildcards
    ("a*", "a*", True),
    ("a.#", "a", True),
    ("#.a.#", "b.a.c", True),
    ("#.a.#", "b.c", False),
]


@pytest.mark.parametrize(("binding_key", "routing_key", "expected"), CASES)
def test_cases(binding_key, routing_key, expected):
    assert topic_matches(binding_key, routing_key) is expected
    assert reference_match(binding_key, routing_key) is expected


def test_split_words():
    assert split_words("") == []
    assert split_words("a") == ["a"]
    assert split_words("a..b") == ["a", "", "b"]
    assert split_words(".") == ["", ""]


def test_bind_unbind_counts_duplicates():
    trie: TopicTrie[str] = TopicTrie()
    trie.bind("a.*", "q")
    trie.bind("a.*", "q")
    trie.bind("#", "r")
    assert trie.match("a.b") == {"q", "r"}
    assert trie.unbind("a.*", "q")
    assert trie.match("a.b") == {"q", "r"}
    assert trie.unbind("a.*", "q")
    assert trie.match("a.b") == {"r"}
    assert not trie.unbind("a.*", "q")
    assert not trie.unbind("x.y", "q")
    assert trie.unbind("#", "r")
    assert len(trie) == 0
    assert trie._root.is_empty()  # pruned back to nothing


def test_many_hashes_do_not_explode():
    trie: TopicTrie[str] = TopicTrie()
    trie.bind(".".join(["#"] * 30) + ".z", "q")
    assert trie.match(".".join(["a"] * 200)) == set()
    assert trie.match(".".join(["a"] * 200) + ".z") == {"q"}


words = st.sampled_from(["a", "b", "", "*", "#", "ab"])
keys = st.lists(words, max_size=6).map(".".join)
routing_words = st.sampled_from(["a", "b", "", "ab", "c"])
routing_keys = st.lists(routing_words, max_size=7).map(".".join)


@settings(max_examples=300)
@given(st.lists(keys, max_size=12), st.lists(routing_keys, min_size=1, max_size=10), st.data())
def test_trie_agrees_with_reference(binding_keys, routing_keys_, data):
    trie: TopicTrie[int] = TopicTrie()
    bound = dict(enumerate(binding_keys))
    for dest, key in bound.items():
        trie.bind(key, dest)
    # unbind a random subset so pruning is exercised too
    for dest in data.draw(st.lists(st.sampled_from(sorted(bound)), unique=True) if bound else st.just([])):
        assert trie.unbind(bound.pop(dest), dest)
    for routing_key in routing_keys_:
        expected = {dest for dest, key in bound.items() if reference_match(key, routing_key)}
        assert trie.match(routing_key) == expected
