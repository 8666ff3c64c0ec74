"""`mirrorbook trigger --conf`: a runbook's conf is refused before anything is sent when a key is unknown or
a value too large — the same rules as the runbook's first task."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorbook.cli import main
from mirrorbook.errors import MirrorbookError
from mirrorbook.trigger import parse_conf

# Nothing listens there: reaching the network would print a connection error, not the refusal.
NOWHERE = ["--url", "http://127.0.0.1:9", "--user", "ops", "--password", "x"]


@pytest.mark.parametrize("dag_id,key", [("mm2_failover", "dryrun"), ("mm2_pause_resume", "dry-run"),
                                        ("mm2_offsets", "Dry_run"), ("mm2_failback", "dryrun")])
def test_a_misspelled_key_is_refused_before_anything_is_sent(capsys, dag_id, key):
    code = main(["trigger", dag_id, "--conf", json.dumps({"flow": "A->B", key: True}), *NOWHERE])
    err = capsys.readouterr().err
    assert code == 2
    assert f'unknown parameter "{key}" — did you mean \'dry_run\'?' in err
    assert "127.0.0.1:9" not in err and "cannot reach" not in err.lower()


def test_sizes_are_checked_before_the_json_is_parsed(capsys):
    assert main(["trigger", "mm2_offsets", "--conf", "[" * 100_000, *NOWHERE]) == 2
    assert "`--conf` is nested more than 6 levels deep" in capsys.readouterr().err
    assert main(["trigger", "mm2_failover", "--conf", json.dumps({"groups": "(" * 5000}), *NOWHERE]) == 2
    assert "`groups` is 5000 characters long; the limit is 1000" in capsys.readouterr().err


def test_another_dags_conf_is_passed_as_is():
    assert parse_conf('{"anything": 1}', "someone_elses_dag") == {"anything": 1}


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200) | st.recursive(st.none() | st.integers() | st.text(max_size=20),
                                                  lambda c: st.lists(c) | st.dictionaries(st.text(max_size=8), c),
                                                  max_leaves=10).map(json.dumps))
def test_any_conf_text_is_parsed_or_refused(text):
    try:
        conf = parse_conf(text, "mm2_failover")
    except MirrorbookError as exc:
        assert len(str(exc)) < 2_000
    else:
        assert isinstance(conf, dict)
