from __future__ import annotations

from itertools import islice

from mirrorbook.connect.errors import (ConnectBadRequest, ConnectConflict, ConnectorNotFound, ConnectorNotStopped,
                                       ConnectServerError, ConnectTimeout, from_response)
from mirrorbook.connect.retry import RetryPolicy


def test_error_mapping_from_status_and_body():
    msg = "Connectors must be in the STOPPED state before their offsets can be modified."
    assert isinstance(from_response(404, {"error_code": 404, "message": "No status found"}, "GET", "/x"),
                      ConnectorNotFound)
    assert isinstance(from_response(400, {"error_code": 400, "message": msg}, "PATCH", "/x"), ConnectorNotStopped)
    assert isinstance(from_response(400, {"message": "bad"}, "PUT", "/x"), ConnectBadRequest)
    assert from_response(409, {"message": "rebalance"}, "GET", "/x").retryable
    assert isinstance(from_response(409, None, "GET", "/x"), ConnectConflict)
    assert isinstance(from_response(500, {"message": "Request timed out"}, "GET", "/x"), ConnectTimeout)
    assert isinstance(from_response(503, "down", "GET", "/x"), ConnectServerError)
    assert not from_response(400, {"message": "bad"}, "PUT", "/x").retryable


def test_backoff_doubles_and_caps():
    delays = list(islice(RetryPolicy(deadline_s=100, initial_s=0.5, max_backoff_s=4, jitter=0).delays(), 6))
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_no_retry_policy_yields_nothing():
    assert list(RetryPolicy(deadline_s=0).delays()) == []
