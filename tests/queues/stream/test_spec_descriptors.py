"""A stream consumer's filters are known by their descriptor, as RabbitMQ
knows them, whatever key the filter set gives them; an undescribed value
goes by its key."""

from __future__ import annotations

import pytest

from amqp.types import Described, Symbol, ULong
from queues.base import QueueArgumentError
from queues.stream.spec import ReadSpec


def test_descriptors_name_the_filters():
    spec = ReadSpec.from_filter_set({
        Symbol("from start"): Described(Symbol("rabbitmq:stream-offset-spec"), "first"),
        Symbol("props"): Described(ULong(0x173), {Symbol("subject"): "s"}),
        Symbol("sql-filter"): Described(ULong(0x120), "n = 1"),
        Symbol("plain"): Described(Symbol("amqp:application-properties-filter"), {"k": "v"}),
    })  # fmt: skip
    assert spec.start == "first" and spec.sql is not None and spec.sql.text == "n = 1"
    assert spec.expressions.properties and spec.expressions.application_properties
    assert set(spec.applied) == {"from start", "props", "sql-filter", "plain"}


def test_unknown_descriptors_are_not_applied_whatever_the_key():
    spec = ReadSpec.from_filter_set({
        Symbol("amqp:sql-filter"): Described(Symbol("apache.org:invalid:string"), "@@@"),
        Symbol("rabbitmq:stream-offset-spec"): Described(ULong(0x999), "first"),
    })  # fmt: skip
    assert spec.applied == () and spec.sql is None and spec.start == "next"


def test_undescribed_values_go_by_their_key():
    spec = ReadSpec.from_filter_set({"rabbitmq:stream-offset-spec": "first", "amqp:sql-filter": "TRUE"})
    assert spec.start == "first" and spec.sql is not None


def test_an_sql_filter_must_be_a_string():
    with pytest.raises(QueueArgumentError, match="must be a string, not int"):
        ReadSpec.from_filter_set({"amqp:sql-filter": 5})
