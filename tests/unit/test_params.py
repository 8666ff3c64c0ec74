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
from mirrorbook.bounds import PARAM_LIMITS, InputTooLarge
from mirrorbook.errors import Refused
from mirrorbook.patterns import InvalidPattern, whole_id_matcher
from mirrorbook.runbooks.alerts import OnAlertParams
from mirrorbook.runbooks.drill import DrillParams
from mirrorbook.runbooks.health import HealthParams
from mirrorbook.runbooks.params import (RUNBOOKS, FailbackParams, FailoverParams, InvalidParams, OffsetsParams,
                                        PauseResumeParams, check_snapshot, parse)
from mirrorbook.topology import Topology
from tests import docs

TOPOLOGY = Topology.model_validate({
    "clusters": {"A": {"connection_id": "a", "bootstrap_servers": "a:9092"},
                 "B": {"connection_id": "b", "bootstrap_servers": "b:9092"}},
    "connect_clusters": {"A": {"connection_id": "ca", "url": "http://a:8083"},
                         "B": {"connection_id": "cb", "url": "http://b:8083"}},
    "flows": [{"source": "A", "target": "B", "connect_cluster": "B"},
              {"source": "B", "target": "A", "connect_cluster": "A"}],
})
MODELS = [*RUNBOOKS.values(), DrillParams, HealthParams, OnAlertParams]
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
    with pytest.raises(InvalidParams) as err:
        parse(model, {"flow": "A->B", "dryrun": True}, TOPOLOGY)
    assert err.value.message == "unknown parameter 'dryrun' — did you mean 'dry_run'?"
    with pytest.raises(InvalidParams, match="unknown parameter 'Dry_Run' — did you mean 'dry_run'\\?"):
        parse(model, {"flow": "A->B", "Dry_Run": True}, TOPOLOGY)


def test_the_docs_quote_the_refusal_as_the_code_words_it():
    readme = " ".join(docs.page("docs/operating.md").split())
    with pytest.raises(InvalidParams) as err:
        parse(FailoverParams, {"flow": "A->B", "dryrun": True}, TOPOLOGY)
    assert f'"{err.value.message}"' in readme, err.value.message  # word for word, quotes and dash included


@pytest.mark.parametrize("model", MODELS)
def test_every_unknown_key_is_refused_and_the_known_ones_are_listed(model):
    with pytest.raises(InvalidParams) as err:
        parse(model, {"zzz_not_a_parameter": 1, "flow": "A->B", "flows": ".*"}, TOPOLOGY)
    assert str(err.value).startswith("unknown parameter 'zzz_not_a_parameter'")
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


def test_integers_too_long_to_convert_are_refused_naming_the_parameter_and_the_limit():
    # Python converts at most 4,300 digits (a ValueError past it, in json.loads, str() and repr() alike).
    with pytest.raises(InputTooLarge) as err:
        parse(FailoverParams, {"flow": "A->B", "max_lag": 10**5000}, TOPOLOGY)
    assert err.value.message == "`max_lag` is an integer of 5001 digits; the limit is 100 digits"
    with pytest.raises(InputTooLarge, match="`drain_timeout` is an integer of 101 digits"):
        parse(FailoverParams, {"flow": "A->B", "drain_timeout": 10**100}, TOPOLOGY)
    assert parse(FailoverParams, {"flow": "A->B", "max_lag": 10**99}, TOPOLOGY).max_lag == 10**99  # 100 digits
    body = '{"offsets": [{"partition": {"cluster": "A", "topic": "t", "partition": 0}, "offset": {"offset": %s}}]}'
    with pytest.raises(InputTooLarge) as err:
        parse(OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": body % ("9" * 5000)}, TOPOLOGY)
    assert err.value.message == "`offsets.offsets.0.offset.offset` is an integer of 5000 digits; the limit is 100 digits"
    with pytest.raises(Refused, match="exceeds a 64-bit offset"):  # within the limit, then out of range
        parse(OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": body % ("9" * 30)}, TOPOLOGY)
    with pytest.raises(InputTooLarge, match="`offsets.offsets.0.partition.partition` is an integer of 4301 digits"):
        parse(OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": {"offsets": [
            {"partition": {"cluster": "A", "topic": "t", "partition": -10**4300}, "offset": None}]}}, TOPOLOGY)


def test_long_keys_inside_nested_values_are_echoed_bounded():
    cases = [
        (FailoverParams, {"flow": "A->B", "x" * 999: {"y" * 999: {"z" * 999: "w" * 1001}}}),  # a string too long
        (FailoverParams, {"flow": "A->B", "x" * 999: {"y" * 999: {"z" * 999: {"q" * 1001: 1}}}}),  # a key too long
        (FailoverParams, {"flow": "A->B", "groups": {"y" * 999: {"z" * 999: [[[[[1]]]]]}}}),  # too deep
        (FailoverParams, {"flow": "A->B", "\x00" * 999: 1, "\n" * 999: 2}),  # unknown keys that escape 6- and 2-fold
        (FailoverParams, {"flow": "A->B", "mode": "\x00" * 999}),  # a value that escapes 6-fold
        (OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": {"k" * 2_000_000: {"j" * 2_000_000: "v"}}}),
        (OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": {"offsets": "v" * 5_000_001}}),
        (OffsetsParams, {"flow": "A->B", "action": "alter",  # as text: keys inside are bounded like the dict's
                         "offsets": json.dumps({"offsets": [{"partition": {"k" * 1_000_000: 1}, "offset": None}]})}),
        (OffsetsParams, {"flow": "A->B", "action": "alter", "offsets": {"offsets": [
            {"partition": {"cluster": "A", "topic": "t" * 900, "partition": 0}, "offset": {"offset": 1, "o" * 900: 1}}]}}),
    ]
    for model, raw in cases:
        with pytest.raises(Refused) as err:
            parse(model, raw, TOPOLOGY)
        assert len(str(err.value)) < 700, (len(str(err.value)), str(err.value)[:300])


def test_re2s_reason_echoes_the_pattern_bounded():
    with pytest.raises(InvalidPattern) as err:
        whole_id_matcher("(" * 999)
    assert err.value.reason.startswith("not a regular expression mirrorbook accepts: missing ): ((((")
    assert "… (1010 chars)" in err.value.reason and err.value.reason.count("(") < 220
    with pytest.raises(InvalidParams) as refused:
        parse(FailoverParams, {"flow": "A->B", "groups": "(" * 999}, TOPOLOGY)
    assert len(str(refused.value)) < 700 and "(999 chars)" in str(refused.value)


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
# Sizes are drawn around the limits (PARAM_LIMITS: 1,000 characters a string or key, 6 levels, 100 digits an
# integer) and far past them, not only small: the limits are where inputs used to crash or echo megabytes.
def _sized(limit: int) -> st.SearchStrategy[int]:
    return st.integers(limit - 2, limit + 2) | st.integers(limit + 3, 2_000 * limit)


def _long(limit: int) -> st.SearchStrategy[str]:
    return st.builds(lambda c, n: c * n, st.characters(), _sized(limit))


def _nested(depth: int, leaf: Any, key: str) -> Any:
    for i in range(depth):
        leaf = {key: leaf} if i % 2 else [leaf]
    return leaf


long_text = _long(PARAM_LIMITS.max_string)
huge_ints = st.builds(lambda n, sign: sign * 10**n, _sized(PARAM_LIMITS.max_digits), st.sampled_from([1, -1]))
leaves = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50)
          | long_text | huge_ints)
keys = st.text(max_size=10) | long_text
json_values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4), max_leaves=12) | \
    st.builds(_nested, _sized(PARAM_LIMITS.max_depth), leaves, keys)
digits = st.integers().map(str) | st.builds(lambda n: "9" * n, _sized(PARAM_LIMITS.max_digits))


def _offsets_text(key: str, offset: str, entries: int, depth: int) -> str:
    """A KIP-875 body as text, around OFFSETS_LIMITS (5 MB, 200,000 items): `entries` copies of one entry,
    as many as keep it near 6 MB."""
    entry = '{"partition": %s, "offset": {"offset": %s}}' % (
        json.dumps(_nested(depth, {"cluster": "A", "topic": key, "partition": 0}, "p")), offset)
    return '{"offsets": [%s]}' % ", ".join([entry] * min(entries, 6_000_000 // len(entry)))


offsets_texts = st.builds(_offsets_text, keys, digits, st.integers(1, 3) | st.integers(30_000, 70_000),
                          st.integers(0, 6))


def _keys(model: type) -> st.SearchStrategy[str]:
    return st.sampled_from(list(model.model_fields)) | st.text(max_size=30) | long_text


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_any_input_is_parsed_or_refused_never_crashes(model, data):
    raw = data.draw(st.dictionaries(_keys(model), json_values | st.text() | offsets_texts, max_size=6))
    if data.draw(st.booleans()):
        raw["flow"] = data.draw(st.sampled_from(["A->B", "B->A"]))
    try:
        parsed = parse(model, raw, TOPOLOGY)
    except Refused as exc:
        assert len(str(exc)) < ECHO_BOUND
    else:
        assert set(raw) <= set(model.model_fields)  # nothing unknown got through
        assert isinstance(parsed, model)


hostile = json_values | huge_ints | long_text | offsets_texts | st.builds(_nested, _sized(PARAM_LIMITS.max_depth) | st.integers(1, 4), leaves, keys)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_any_value_of_a_known_parameter_is_parsed_or_refused_and_echoed_bounded(model, data):
    """Each known parameter gets the hostile values (an alter's `offsets` is parsed, so it gets them too)."""
    raw: dict[str, Any] = {"flow": "A->B"} if "flow" in model.model_fields else {}
    if model is OffsetsParams:
        raw["action"] = "alter"
    raw[data.draw(st.sampled_from(list(model.model_fields)))] = data.draw(hostile)
    try:
        parse(model, raw, TOPOLOGY)
    except Refused as exc:
        assert len(str(exc)) < ECHO_BOUND, str(exc)[:300]


@settings(max_examples=60, deadline=None)
@given(groups=st.text(max_size=60))
def test_any_groups_pattern_compiles_or_is_refused(groups):
    try:
        parse(FailoverParams, {"flow": "A->B", "groups": groups}, TOPOLOGY)
    except InvalidParams as exc:
        assert "`groups`" in str(exc) and len(str(exc)) < ECHO_BOUND
