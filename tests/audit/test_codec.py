"""The store's gate (audit/codec.py), without a database: every value becomes storable and bounded,
and distinct short values stay distinct however they were cut, escaped or redacted."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mirrorbook.audit import InvalidAuditData
from mirrorbook.audit.codec import (TEXT_LIMIT, _fit, audit_json, data_json, dumps, escaped, identity, long_text,
                                    short_text)
from mirrorbook.audit.schema import flow_locks
from mirrorbook.redaction import redact_text, utf8

# Any code point, control characters and lone surrogates included (hypothesis leaves surrogates out by default).
_any_text = st.text(st.characters(codec=None, categories=None))
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                     | _any_text, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_any_text, inner,
                                                                                           max_size=6),
                     max_leaves=30)


def storable(text: str) -> bool:
    """Whether both backends can keep `text` as it is (no NUL, valid UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def test_escapes_are_visible() -> None:
    assert escaped("a\x00b\ud800c😀") == "a\\x00b\\ud800c😀"
    assert escaped("plain") == "plain"


def test_short_values_are_kept_as_they_are_unless_changed() -> None:
    assert short_text("A->B", 250) == "A->B"
    assert short_text("f" * 200, 250) == "f" * 200
    cut = short_text("f" * 251, 250)
    assert cut.startswith("f" * 200 + "… (251 chars) #") and len(cut) <= 250
    assert short_text("a\x00", 250).startswith("a\\x00 #")
    assert short_text("http://u:hunter2@h", 250).startswith("http://u:***@h #")
    assert long_text("e" * 1_000_000) == "e" * TEXT_LIMIT + "… (1000000 chars)"


@pytest.mark.parametrize("a, b", [
    ("A" * 200 + "1", "A" * 200 + "2"),          # cut to the same 200 characters
    ("A" * 300, "A" * 301),                      # same prefix, different lengths
    ("a\x00", "a\\x00"),                         # a NUL and the escape a reviewer sees for it
])
def test_distinct_values_stay_distinct(a: str, b: str) -> None:
    assert short_text(a, 250) != short_text(b, 250)


def test_a_value_forged_to_look_stored_is_not_the_value_it_imitates() -> None:
    real = "A" * 1000
    forged = short_text(real, 250)  # what the table holds for `real`, sent as a value of its own
    assert short_text(forged, 250) != forged


@settings(max_examples=500, deadline=None)
@given(text=_any_text | st.integers(0, 3000).map(lambda n: "x\x00" * n), width=st.sampled_from([64, 100, 250, 500]))
def test_short_values_fit_their_column_and_any_backend(text: str, width: int) -> None:
    out = short_text(text, width)
    assert len(out) <= width and storable(out)
    assert short_text(text, width) == out  # lookups find what was written


@settings(max_examples=500, deadline=None)
@given(common=_any_text, a=_any_text, b=_any_text, pad=st.integers(0, 400))
def test_short_values_are_injective(common: str, a: str, b: str, pad: int) -> None:
    x, y = "c" * pad + common + a, "c" * pad + common + b
    assume(utf8(x) != utf8(y) and redact_free(x) and redact_free(y))  # a lone surrogate is its escape
    assert short_text(x, 250) != short_text(y, 250)


def redact_free(text: str) -> bool:
    return redact_text(escaped(text)) == escaped(text)


def test_ids_that_carry_credentials_are_refused_for_locks() -> None:
    # two run ids differing only in a secret would be stored alike: no lock may rest on that
    with pytest.raises(InvalidAuditData, match="carries a credential"):
        identity(flow_locks.c.run_id, "run password=hunter2")
    assert identity(flow_locks.c.run_id, "A" * 300) == short_text("A" * 300, 250)


@settings(max_examples=200, deadline=None)
@given(value=_JSON, big=st.integers(0, 200_000))
def test_audit_json_is_bounded_storable_and_keeps_its_shape(value, big: int) -> None:
    doc = {"value": value, "big": "\x01" * big, "list": list(range(big // 10))}
    text = audit_json(doc)
    assert len(text) <= TEXT_LIMIT and storable(text)
    assert set(json.loads(text)) == {"value", "big", "list"}


@settings(max_examples=300, deadline=None)
@given(value=_JSON, limit=st.integers(24, 2000))
def test_fit_bounds_any_value(value, limit: int) -> None:
    value = json.loads(audit_json(value))  # escaped and redacted, as the store fits it
    fitted = _fit(value, limit)
    assert len(dumps(fitted)) <= limit
    assert type(fitted) is type(value) or not isinstance(value, (dict, list))


def test_a_huge_request_keeps_its_shape() -> None:
    request = {"method": "PUT", "path": "/connectors/x/offsets", "status": 400,
               "body": {"offsets": [{"partition": {"p": i}, "offset": {"o": i}} for i in range(50_000)]}}
    stored = json.loads(audit_json(request))
    assert stored["method"] == "PUT" and stored["path"] == "/connectors/x/offsets" and stored["status"] == 400
    offsets = stored["body"]["offsets"]
    assert offsets[0] == {"partition": {"p": 0}, "offset": {"o": 0}}
    assert offsets[-1].startswith("… ") and offsets[-1].endswith(" more")
    assert len(dumps(stored)) <= TEXT_LIMIT


def test_nesting_beyond_the_limit() -> None:
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    assert len(audit_json(deep)) <= TEXT_LIMIT  # the deep part is kept as its bounded repr
    with pytest.raises(InvalidAuditData, match="nested more than"):
        data_json(deep)  # data read back must not change shape: refused instead


def test_data_is_escaped_and_redacted_never_cut() -> None:
    payload = {"k\x00": "v" * 200_000, "sasl.jaas.config": "x", "s\ud800": 1}
    assert json.loads(data_json(payload)) == {"k\\x00": "v" * 200_000, "sasl.jaas.config": "***", "s\\ud800": 1}
