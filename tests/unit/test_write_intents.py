"""What a failover's write-ahead intent records of each group it writes: its offsets as one text (so a thousand
groups' intents pass the audit store's gate in milliseconds), read back exactly; an intent kept by an older release
(a list of triples) still reads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.kafka.types import TP
from mirrorbook.runbooks.intents import _EXPECT, GroupOffsets

# Kafka topic names: letters, digits, '.', '_' and '-'
topics = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=20)
offsets = st.dictionaries(st.builds(TP, topics, st.integers(0, 10_000)), st.integers(0, 2**62), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), offsets, max_size=4))
def test_every_groups_offsets_read_back_as_written(groups):
    expect = GroupOffsets.of("B", groups)
    kept = _EXPECT.validate_python(expect.model_dump(mode="json"))  # as an open intent is read back
    assert set(kept.groups) == set(groups)
    for g, offs in groups.items():
        assert kept.offsets(g) == [(tp.topic, tp.partition, o) for tp, o in sorted(offs.items())]


def test_an_intent_kept_as_triples_still_reads():
    old = {"kind": "group-offsets", "cluster": "B", "groups": {"g": [["A.t", 0, 5], ["A.t", 1, 7]]}}
    assert _EXPECT.validate_python(old).offsets("g") == [("A.t", 0, 5), ("A.t", 1, 7)]
