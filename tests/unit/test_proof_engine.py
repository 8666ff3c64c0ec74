"""Where a run's proofs run (`mirrorbook.parity.engine`): the choice table on plain values, no Airflow, no Spark.
What Airflow's connections make of docs/proofs.md's three ways is tests/unit/test_spark_connections_doc.py's."""

from __future__ import annotations

import pytest
from hypothesis import event, given, strategies as st

from mirrorbook.errors import Refused
from mirrorbook.parity.engine import BY_RUN, BY_TOPOLOGY, ConnectChoice, choose, connect_choice, submit_master
from mirrorbook.parity.submit import DEFAULT_MASTER, is_local

DEFAULT = "spark_connect_default"
URL = "sc://spark-connect.example:15002/"
URI = "s3a://dr-evidence/mirrorbook"
NAMED = ConnectChoice("spark_dr", BY_TOPOLOGY, DEFAULT)
UNNAMED = ConnectChoice(DEFAULT, None, DEFAULT)


@pytest.mark.parametrize("run, topology, chosen", [
    ("spark_run", "spark_estate", ConnectChoice("spark_run", BY_RUN, DEFAULT)),
    ("  spark_run ", None, ConnectChoice("spark_run", BY_RUN, DEFAULT)),
    ("", "spark_estate", ConnectChoice("spark_estate", BY_TOPOLOGY, DEFAULT)),
    ("   ", "spark_estate", ConnectChoice("spark_estate", BY_TOPOLOGY, DEFAULT)),
    (None, None, UNNAMED),
    ("", "", UNNAMED),
])
def test_the_run_names_the_connection_before_the_topology_before_the_default(run, topology, chosen):
    assert connect_choice(run, topology, DEFAULT) == chosen


# connect choice, the server's URL, the Spark connection's master, the parity URI
#   -> kind, master the job is built for, staging URI, as the verdict says it, refused?
TABLE = [
    (UNNAMED, URL, "yarn", URI, "spark-connect", DEFAULT_MASTER, None, f"spark-connect ({DEFAULT})", False),
    (NAMED, URL, None, None, "spark-connect", DEFAULT_MASTER, None, "spark-connect (spark_dr)", False),
    (UNNAMED, None, "local[2]", None, "spark-submit", "local[2]", None, "spark-submit (local[2])", False),
    (UNNAMED, None, "yarn", URI, "spark-submit", "yarn", URI, f"spark-submit (yarn, through {URI})", False),
    (UNNAMED, None, "yarn", None, "spark-submit", "yarn", None, "spark-submit (yarn)", True),
    (UNNAMED, None, "local-cluster[2,1,1024]", None, "spark-submit", "local-cluster[2,1,1024]", None,
     "spark-submit (local-cluster[2,1,1024])", True),
    (UNNAMED, None, None, None, "local", DEFAULT_MASTER, None, "spark-submit (local[*])", False),
    (UNNAMED, None, None, URI, "local", DEFAULT_MASTER, URI, f"spark-submit (local[*], through {URI})", False),
    (NAMED, None, None, None, "local", DEFAULT_MASTER, None, "spark-submit (local[*])", True),
    (NAMED, None, "local[*]", URI, "spark-submit", "local[*]", URI, f"spark-submit (local[*], through {URI})", True),
]


@pytest.mark.parametrize("connect, url, master, uri, kind, built_for, staged, said, refused", TABLE)
def test_the_choice_table(connect, url, master, uri, kind, built_for, staged, said, refused):
    chosen = choose(connect, url, master, uri)
    assert (chosen.kind, chosen.master, chosen.uri, chosen.describe()) == (kind, built_for, staged, said)
    assert chosen.url == (url if kind == "spark-connect" else None)
    assert (chosen.refusal() is not None) is refused


def test_a_refusal_names_what_is_missing_and_both_ways_out():
    named = choose(NAMED, None, "yarn", URI).refusal()
    assert named is not None and '"spark_dr" named by the topology\'s spark_connect_connection_id does not exist' \
        in str(named) and "parity=off" in str(named)
    cluster = choose(UNNAMED, None, "yarn", None).refusal()
    assert cluster is not None and 'on master "yarn"' in str(cluster)
    assert f"({DEFAULT!r}, type spark_connect)" in str(cluster) and "MIRRORBOOK_PARITY_URI" in str(cluster)


def test_check_raises_the_refusal_and_tries_the_uri(tmp_path):
    with pytest.raises(Refused, match="does not exist"):
        choose(NAMED, None, None, None).check()
    choose(UNNAMED, None, "yarn", f"file://{tmp_path}/shared").check()  # writable: accepted, and made
    assert (tmp_path / "shared").is_dir()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(Refused, match=r'^parity=spark by spark-submit on master "yarn": .*not writable'):
        choose(UNNAMED, None, "yarn", f"file://{blocker}/below").check()


@pytest.mark.parametrize("conn_type, host, port, master", [
    ("spark", "yarn", None, "yarn"),
    ("spark", "local[*]", None, "local[*]"),
    ("spark", "spark://spark-master", 7077, "spark://spark-master:7077"),
    ("spark", "spark-master", 7077, "spark://spark-master:7077"),
    ("spark", "k8s://https://kubernetes.default.svc", None, "k8s://https://kubernetes.default.svc"),
    ("spark", None, None, "spark://"),
    ("mesos", "host", 5050, "mesos://host:5050"),
])
def test_a_spark_connections_master_as_the_provider_reads_it(conn_type, host, port, master):
    assert submit_master(conn_type, host, port) == master


MASTERS = st.one_of(st.sampled_from(["local", "local[*]", "local[4]", "local-cluster[2,1,1024]", "yarn",
                                     "spark://m:7077", "k8s://https://k"]), st.text(max_size=12))
IDS = st.text(alphabet="abc_ ", max_size=6)


@given(run=st.none() | IDS, topology=st.none() | IDS, default=IDS.filter(str.strip),
       with_server=st.sets(st.sampled_from(["run", "topology", "default"])), master=st.none() | MASTERS,
       uri=st.none() | st.just(URI))
def test_a_server_wins_and_a_run_is_refused_only_where_its_proofs_could_not_run(run, topology, default, with_server,
                                                                                master, uri):
    # which of the three candidates have a Spark Connect connection: only the chosen one's counts
    candidates = {"run": (run or "").strip(), "topology": topology, "default": default}
    servers = {candidates[c]: URL for c in with_server if candidates[c]}
    connect = connect_choice(run, topology, default)
    chosen = choose(connect, servers.get(connect.conn_id), master, uri)
    event(chosen.kind)
    # the first non-blank of the run's, the topology's (as given), the default; named unless it is the default
    expected = (run or "").strip() or topology or default
    assert connect.conn_id == expected and (connect.named_by is None) == (not (run or "").strip() and not topology)
    assert (chosen.kind == "spark-connect") == (connect.conn_id in servers)
    assert chosen.kind != "local" or chosen.master == DEFAULT_MASTER
    could_not_run = chosen.kind != "spark-connect" and (
        connect.named_by is not None or (uri is None and not is_local(chosen.master)))
    assert (chosen.refusal() is not None) == could_not_run
    assert chosen.describe().endswith(f", through {URI})") == (chosen.kind != "spark-connect" and uri is not None)
