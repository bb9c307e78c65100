"""Every setting of node/config.py is also a `warren server` flag."""

from __future__ import annotations

import os
from dataclasses import fields

import pytest

from node.cli import build_parser, server_config
from node.config import Config


def parse(*argv: str) -> Config:
    return server_config(build_parser().parse_args(["server", *argv]))


def test_every_setting_has_a_flag():
    help_text = build_parser()._subparsers._group_actions[0].choices["server"].format_help()
    for f in fields(Config):
        if f.name != "definitions_file":  # --definitions
            assert "--" + f.name.replace("_", "-") in help_text, f.name


def test_flags_are_typed_like_the_settings(monkeypatch):
    for name in list(os.environ):  # only the flags count here
        if name.startswith("WARREN_"):
            monkeypatch.delenv(name)
    cfg = parse("--login-workers", "3", "--login-failure-delay", "0.5", "--loopback-users", "a,b",
                "--amqp-port", "5999", "--definitions", "defs.json")  # fmt: skip
    assert cfg.login_workers == 3 and cfg.login_failure_delay == 0.5 and cfg.loopback_users == ["a", "b"]
    assert cfg.amqp_port == 5999 and cfg.definitions_file == "defs.json"
    assert cfg.login_cache_size == Config().login_cache_size  # not given: the default


def test_the_consumer_timeout_setting_is_rabbitmqs_and_a_negative_one_is_refused(monkeypatch):
    monkeypatch.delenv("WARREN_CONSUMER_TIMEOUT", raising=False)
    assert parse().consumer_timeout == 1_800_000  # RabbitMQ's consumer_timeout default: 30 minutes
    assert parse("--consumer-timeout", "0").consumer_timeout == 0  # none
    with pytest.raises(ValueError, match="consumer_timeout must be 0"):
        parse("--consumer-timeout", "-1")
