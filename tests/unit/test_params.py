"""The runbooks' parameter boundary: unknown keys, sizes, patterns, bounded echoes — and, by property
tests, that no input whatsoever gets anything but a result or a clear refusal."""

from __future__ import annotations

import json
import signal
from contextlib import contextmanager
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorbook.audit import AuditStore
from mirrorbook.bounds import InputTooLarge
from mirrorbook.errors import Refused
from mirrorbook.patterns import InvalidPattern, whole_id_matcher
from mirrorbook.runbooks.drill import DrillParams
from mirrorbook.runbooks.health import HealthParams
from mirrorbook.runbooks.params import (RUNBOOKS, FailbackParams, FailoverParams, InvalidParams, OffsetsParams,
                                        PauseResumeParams, check_snapshot, parse)
from mirrorbook.topology import Topology

TOPOLOGY = Topology.model_validate({
    "clusters": {"A": {"connection_id": "a", "bootstrap_servers": "a:9092"},
                 "B": {"connection_id": "b", "bootstrap_servers": "b:9092"}},
    "connect_clusters": {"A": {"connection_id": "ca", "url": "http://a:8083"},
                         "B": {"connection_id": "cb", "url": "http://b:8083"}},
    "flows": [{"source": "A", "target": "B", "connect_cluster": "B"},
              {"source": "B", "target": "A", "connect_cluster": "A"}],
})
MODELS = [*RUNBOOKS.values(), DrillParams, HealthParams]
ECHO_BOUND = 2_000  # no refusal message grows with its input beyond this


@contextmanager
def finishes_within(seconds: int) -> Iterator[None]:
    """Guard against a hang (catastrophic backtracking would take minutes), not a speed assertion."""
    def boom(*_: Any) -> None:
        raise AssertionError(f"did not finish within {seconds}s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("model", [PauseResumeParams, OffsetsParams, FailoverParams, FailbackParams])
def test_a_misspelled_dry_run_is_refused_naming_the_closest_key(model):
    with pytest.raises(InvalidParams, match="unknown parameter \"dryrun\" — did you mean 'dry_run'\\?"):
        parse(model, {"flow": "A->B", "dryrun": True}, TOPOLOGY)
    with pytest.raises(InvalidParams, match="unknown parameter \"Dry_Run\" — did you mean 'dry_run'\\?"):
        parse(model, {"flow": "A->B", "Dry_Run": True}, TOPOLOGY)


@pytest.mark.parametrize("model", MODELS)
def test_every_unknown_key_is_refused_and_the_known_ones_are_listed(model):
    with pytest.raises(InvalidParams) as err:
        parse(model, {"zzz_not_a_parameter": 1, "flow": "A->B", "flows": ".*"}, TOPOLOGY)
    assert str(err.value).startswith('unknown parameter "zzz_not_a_parameter"')
    assert ("did you mean 'flow'?" if "flow" in model.model_fields else "did you mean 'flows'?") in str(err.value)
    assert all(name in str(err.value) for name in model.model_fields)


def test_sizes_are_checked_before_anything_parses_or_compiles():
    with finishes_within(10), pytest.raises(InputTooLarge, match="`groups` is 1000000 characters long; the limit"):
        parse(FailoverParams, {"flow": "A->B", "groups": "(" * 1_000_000}, TOPOLOGY)
    deep: Any = 0
    for _ in range(100_000):  # {"offsets": {"offsets": ...}} 100,000 levels deep
        deep = {"offsets": deep}
    with finishes_within(10), pytest.raises(InputTooLarge, match="`offsets` is nested more than 6 levels deep"):
        parse(OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": deep}, TOPOLOGY)
    as_text = '{"offsets": ' * 100_000 + "0" + "}" * 100_000
    with finishes_within(10), pytest.raises(InputTooLarge, match="`offsets` is nested more than 6 levels deep"):
        parse(OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": as_text}, TOPOLOGY)
    with pytest.raises(InvalidParams, match="a parameter name is 5000 characters long"):
        parse(FailoverParams, {"flow": "A->B", "k" * 5000: 1}, TOPOLOGY)


def test_group_patterns_match_in_linear_time_and_what_re2_cannot_express_is_refused():
    matches = whole_id_matcher("(a+)+$")
    with finishes_within(10):
        assert not matches("a" * 100_000 + "b")
    assert whole_id_matcher("orders-.*|billing-.*")("billing-eu")
    assert not whole_id_matcher("orders-.*")("xorders-1")  # the whole id must match, as in MM2
    with pytest.raises(InvalidPattern, match="invalid escape sequence"):
        whole_id_matcher(r"(a)\1")
    with pytest.raises(InvalidParams, match="`groups`: not a regular expression mirrorbook accepts: invalid perl "
                                            "operator: \\(\\?="):
        parse(FailoverParams, {"flow": "A->B", "groups": "(?=x)y"}, TOPOLOGY)


def test_echoes_are_bounded():
    huge = "x" * 1_000_000
    for raw in ({"flow": huge[:999]}, {"flow": "A->B", "mode": huge[:999]}, {"flow": "A->B", huge[:999]: 1}):
        with pytest.raises(Refused) as err:
            parse(FailoverParams, raw, TOPOLOGY)
        assert len(str(err.value)) < ECHO_BOUND, str(err.value)[:300]
        assert "… (999 chars)" in str(err.value)


def test_translation_follows_the_mode_and_precise_needs_the_source():
    assert parse(FailoverParams, {"flow": "A->B"}, TOPOLOGY).translation == "precise"
    assert parse(FailoverParams, {"flow": "A->B", "mode": "unplanned"}, TOPOLOGY).translation == "mm2"
    with pytest.raises(InvalidParams, match="Invalid parameter `translation`: precise reads records on the cluster "
                                            "being left"):
        parse(FailoverParams, {"flow": "A->B", "mode": "unplanned", "translation": "precise"}, TOPOLOGY)


def test_offsets_are_parsed_once_and_kept_validated():
    body = {"offsets": [{"partition": {"cluster": "A", "topic": "t", "partition": 0}, "offset": {"offset": 5}}]}
    p = parse(OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": json.dumps(body)}, TOPOLOGY)
    assert p.parsed_offsets is not None and p.parsed_offsets.offsets[0].offset == {"offset": 5}
    with pytest.raises(InvalidParams, match="`snapshot_id` is only used by action=restore"):
        parse(OffsetsParams, {"flow": "A->B", "action": "reset", "snapshot_id": "snap-1"}, TOPOLOGY)


def test_an_unknown_snapshot_is_refused_up_front_naming_the_flows_latest(tmp_path):
    audit = AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")
    flow = TOPOLOGY.flow("A->B")
    name = flow.connector("source")
    sids = [audit.save_snapshot("connector-offsets", flow.name, name, {"offsets": []}, note=f"before alter {i}")
            for i in range(3)]
    other = audit.save_snapshot("group-offsets", flow.name, "B:consumer-groups", {"groups": {}})
    check_snapshot(audit, flow, name, sids[1])
    with pytest.raises(InvalidParams) as err:
        check_snapshot(audit, flow, name, "snap-does-not-exist")
    assert "No snapshot \"snap-does-not-exist\"" in str(err.value)
    assert str(err.value).index(sids[2]) < str(err.value).index(sids[0])  # newest first
    with pytest.raises(InvalidParams, match="holds group-offsets of \"B:consumer-groups\", not the offsets of"):
        check_snapshot(audit, flow, name, other)


# -- property tests: any input at all gets a result or a refusal, never a crash ---------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)


def _keys(model: type) -> st.SearchStrategy[str]:
    return st.sampled_from(list(model.model_fields)) | st.text(max_size=30)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_input_is_parsed_or_refused_never_crashes(model, data):
    raw = data.draw(st.dictionaries(_keys(model), json_values | st.text(), max_size=6))
    if data.draw(st.booleans()):
        raw["flow"] = data.draw(st.sampled_from(["A->B", "B->A"]))
    try:
        parsed = parse(model, raw, TOPOLOGY)
    except Refused as exc:
        assert len(str(exc)) < ECHO_BOUND
    else:
        assert set(raw) <= set(model.model_fields)  # nothing unknown got through
        assert isinstance(parsed, model)


@settings(max_examples=60, deadline=None)
@given(groups=st.text(max_size=60))
def test_any_groups_pattern_compiles_or_is_refused(groups):
    try:
        parse(FailoverParams, {"flow": "A->B", "groups": groups}, TOPOLOGY)
    except InvalidParams as exc:
        assert "`groups`" in str(exc) and len(str(exc)) < ECHO_BOUND
