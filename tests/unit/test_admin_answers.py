"""Waiting on librdkafka's answers is bounded: a future it never completes fails the attempt as timed out (retried
through a new client within the call's deadline) instead of holding a runbook for good."""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaException

from mirrorbook.kafka.admin import _answered


def _done(value: object) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut


def test_answered_futures_come_back_in_order_at_once() -> None:
    futures = {"g1": _done(1), "g2": _done(2)}
    assert [(k, f.result()) for k, f in _answered(futures, 10.0)] == [("g1", 1), ("g2", 2)]


def test_a_failed_answer_is_handed_back_for_its_caller_to_judge() -> None:
    failed: Future = Future()
    failed.set_exception(KafkaException("GROUP_ID_NOT_FOUND"))
    [(key, fut)] = list(_answered({"g": failed}, 10.0))
    assert key == "g" and isinstance(fut.exception(), KafkaException)


def test_a_future_never_answered_fails_as_a_retriable_timeout_within_twice_the_request_timeout() -> None:
    futures = {"g1": _done(1), "g2": Future(), "g3": Future()}
    t0 = time.monotonic()
    seen = []
    with pytest.raises(KafkaException) as raised:
        for key, _ in _answered(futures, 0.2):
            seen.append(key)
    assert 0.35 <= time.monotonic() - t0 < 2.0
    err = raised.value.args[0]
    assert err.name() == "_TIMED_OUT" and err.retriable()
    assert "no answer within 0.4s (2 of 3 request(s) unanswered)" in err.str()
    assert seen == ["g1"]
