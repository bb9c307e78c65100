"""routing/policies.py: validation, which policy applies, and the merge."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from routing import policies


@dataclass
class P:
    name: str
    pattern: str = ".*"
    apply_to: str = "all"
    definition: dict = field(default_factory=lambda: {"max-length": 1})
    priority: int = 0


def test_validate_refuses_what_rabbitmq_refuses():
    assert policies.validate({"max-length": 3, "overflow": "reject-publish"}) == {"max-length": 3,
                                                                                 "overflow": "reject-publish"}
    for bad in ({}, {"max-length": -1}, {"max-length": True}, {"expires": 0}, {"delivery-limit": -2},
                {"queue-leader-locator": "random"}, {"dead-letter-strategy": "twice"}, {"ha-mode": "all"},
                {"dead-letter-routing-key": "k"}, [("max-length", 1)]):  # fmt: skip
        with pytest.raises(policies.PolicyError):
            policies.validate(bad)
    with pytest.raises(policies.PolicyError, match="operator policy"):
        policies.validate({"dead-letter-exchange": "x"}, operator=True)
    with pytest.raises(policies.PolicyError, match="apply-to"):
        policies.validate({"max-length": 1}, "streams-only")


def test_choose_by_apply_to_pattern_and_priority():
    ps = [P("a", "^orders", priority=1), P("b", "ders", priority=1), P("c", "x", priority=9),
          P("q", "orders", "quorum_queues", priority=5), P("e", "orders", "exchanges", priority=7)]  # fmt: skip
    assert policies.choose(ps, "queue", "orders", "classic").name == "a"  # tie on priority: by name
    assert policies.choose(ps, "queue", "orders", "quorum").name == "q"
    assert policies.choose(ps, "exchange", "orders").name == "e"
    assert policies.choose(ps, "queue", "nothing", "classic") is None
    assert policies.choose([P("s", "ders", "classic_queues")], "queue", "my-orders", "classic").name == "s"


def test_queue_arguments_win_and_operator_policies_cap():
    policy = P("p", definition={"max-length": 10, "message-ttl": 500, "dead-letter-exchange": "dlx"})
    op = P("o", definition={"max-length": 4, "expires": 1000, "delivery-limit": 3})
    eff = policies.effective({"x-max-length": 2, "x-message-ttl": 900, "x-delivery-limit": -1}, policy, op)
    assert eff.policy == "p" and eff.operator_policy == "o"
    assert eff.arguments == {"x-max-length": 2, "x-message-ttl": 900, "x-dead-letter-exchange": "dlx",
                             "x-expires": 1000, "x-delivery-limit": 3}  # fmt: skip
    assert eff.definition == {"max-length": 4, "message-ttl": 500, "dead-letter-exchange": "dlx", "expires": 1000,
                              "delivery-limit": 3}  # fmt: skip
    none = policies.effective({"x-max-length": 2})
    assert none.policy is None and none.definition == {} and none.arguments == {"x-max-length": 2}


def test_an_operator_overflow_replaces_the_policys_and_the_queues_own_argument_wins():
    policy, op = P("p", definition={"overflow": "drop-head"}), P("o", definition={"overflow": "reject-publish"})
    eff = policies.effective({}, policy, op)
    assert eff.arguments == {"x-overflow": "reject-publish"} and eff.definition == {"overflow": "reject-publish"}
    assert policies.effective({"x-overflow": "reject-publish-dlx"}, policy, op).arguments == {
        "x-overflow": "reject-publish-dlx"}
    assert policies.effective({}, None, P("o", definition={"queue-version": 1})).arguments == {"x-queue-version": 1}
    assert policies.validate({"overflow": "reject-publish"}, operator=True) == {"overflow": "reject-publish"}


def test_an_operator_target_group_size_takes_the_larger():
    op = P("o", definition={"target-group-size": 5})
    assert policies.effective({}, P("p", definition={"target-group-size": 3}), op).arguments == {
        "x-target-group-size": 5}
    assert policies.effective({}, P("p", definition={"target-group-size": 7}), op).definition == {
        "target-group-size": 7}


def test_alternate_exchange_is_an_exchange_key_never_a_queue_argument():
    assert policies.validate({"alternate-exchange": "ae"}, "exchanges") == {"alternate-exchange": "ae"}
    with pytest.raises(policies.PolicyError, match="'alternate-exchange' must be a string"):
        policies.validate({"alternate-exchange": 1}, "exchanges")
    with pytest.raises(policies.PolicyError, match="operator policy"):
        policies.validate({"alternate-exchange": "ae"}, operator=True)
    policy = P("p", definition={"alternate-exchange": "ae", "max-length": 3})
    eff = policies.effective({}, policy)
    assert eff.arguments == {"x-max-length": 3}  # a queue does not act on an exchange's key
    assert eff.definition == {"alternate-exchange": "ae", "max-length": 3}  # shown whole, as RabbitMQ
    assert policies.alternate_exchange(policy) == "ae"
    assert policies.alternate_exchange(P("q")) is None and policies.alternate_exchange(None) is None


def test_consumer_timeout_the_smaller_of_the_queues_and_the_policys_wins():
    assert policies.validate({"consumer-timeout": 60_000}, "queues") == {"consumer-timeout": 60_000}
    for bad in (0, -5, "60000", True):
        with pytest.raises(policies.PolicyError, match="'consumer-timeout' must be a positive integer"):
            policies.validate({"consumer-timeout": bad})
    with pytest.raises(policies.PolicyError, match="does not apply to streams"):
        policies.validate({"consumer-timeout": 1000}, "streams")
    policy = P("p", definition={"consumer-timeout": 5000})
    assert policies.effective({}, policy).arguments == {"x-consumer-timeout": 5000}
    assert policies.effective({"x-consumer-timeout": 9000}, policy).arguments == {"x-consumer-timeout": 5000}
    assert policies.effective({"x-consumer-timeout": 2000}, policy).arguments == {"x-consumer-timeout": 2000}
