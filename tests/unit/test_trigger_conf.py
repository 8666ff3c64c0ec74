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
    assert f"unknown parameter '{key}' — did you mean 'dry_run'?" in err
    assert "127.0.0.1:9" not in err and "cannot reach" not in err.lower()


def test_sizes_are_checked_before_the_json_is_parsed(capsys):
    assert main(["trigger", "mm2_offsets", "--conf", "[" * 100_000, *NOWHERE]) == 2
    assert "`--conf` is nested more than 6 levels deep" in capsys.readouterr().err
    assert main(["trigger", "mm2_failover", "--conf", json.dumps({"groups": "(" * 5000}), *NOWHERE]) == 2
    assert "`groups` is 5000 characters long; the limit is 1000" in capsys.readouterr().err


def test_an_integer_too_long_for_python_is_refused_naming_the_parameter(capsys, tmp_path):
    # Python converts at most 4,300 digits; json.loads used to raise that ValueError as a traceback.
    conf = '{"flow": "A->B", "max_lag": ' + "9" * 5000 + "}"
    assert main(["trigger", "mm2_failover", "--conf", conf, *NOWHERE]) == 2
    err = capsys.readouterr().err
    assert err == "error: `--conf.max_lag` is an integer of 5000 digits; the limit is 100 digits\n"
    (tmp_path / "conf.json").write_text('{"anything": [-' + "1" * 4301 + "]}")
    assert main(["trigger", "someone_elses_dag", "--conf", f"@{tmp_path / 'conf.json'}", *NOWHERE]) == 2
    assert "`--conf.anything.0` is an integer of 4301 digits; the limit is 100 digits" in capsys.readouterr().err


def test_another_dags_conf_is_passed_as_is():
    assert parse_conf('{"anything": 1}', "someone_elses_dag") == {"anything": 1}


digits = st.integers(90, 6000).map(lambda n: "-" * (n % 2) + "7" * n)  # around the limit, and past Python's
big_ints = st.integers(90, 4299).map(lambda n: 7 * 10**n)  # json.dumps converts at most 4,300 digits


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200) | st.recursive(st.none() | st.integers() | st.text(max_size=20) | big_ints,
                                                  lambda c: st.lists(c) | st.dictionaries(st.text(max_size=8), c),
                                                  max_leaves=10).map(json.dumps)
       | st.builds(lambda k, d: '{"%s": %s}' % (k, d), st.sampled_from(["max_lag", "drain_timeout", "flow", "x"]),
                   digits))
def test_any_conf_text_is_parsed_or_refused(text):
    try:
        conf = parse_conf(text, "mm2_failover")
    except MirrorbookError as exc:
        assert len(str(exc)) < 2_000
    else:
        assert isinstance(conf, dict)
