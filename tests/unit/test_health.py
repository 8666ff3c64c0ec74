"""The health check's pure parts: reading MM2's topics, checkpoint staleness across samples, thresholds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from confluent_kafka import Message

from mirrorbook.audit import MetricsSample
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import ConnectorSummary, DetailedState, FlowState, FlowStatus, PartitionLag, Unreadable
from mirrorbook.mm2.records import Checkpoint, Heartbeat
from mirrorbook.runbooks.health import (FlowHealth, GroupCheckpointHealth, HealthParams, TargetFreshness,
                                        evaluate, failed_roles, group_checkpoints, scan_target)
from mirrorbook.runbooks.params import InvalidParams, parse
from mirrorbook.topology import FlowSpec, KafkaClusterSpec, ConnectClusterSpec, Topology

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
FLOW = FlowSpec(source="A", target="B", connect_cluster="B")
TOPOLOGY = Topology(clusters={"A": KafkaClusterSpec(connection_id="a"), "B": KafkaClusterSpec(connection_id="b")},
                    connect_clusters={"B": ConnectClusterSpec(connection_id="c")}, flows=[FLOW])


CHECKPOINTS = "A.checkpoints.internal"


def msg(topic: str, key: bytes | None, value: bytes | None, ts: int) -> Message:
    return Message(topic=topic, partition=0, offset=0, key=key, value=value, timestamp=(1, ts))


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _status(state: str = "REPLICATING", source: str = "RUNNING", tasks: list[str] | None = None,
            lag: dict[TP, int] | None = None) -> FlowStatus:
    tasks = ["RUNNING"] if tasks is None else tasks
    conns = {"source": ConnectorSummary(name="A->B.MirrorSourceConnector", role="source",
                                        connector_class="MirrorSourceConnector", state=source,
                                        tasks_running=tasks.count("RUNNING"), tasks=tasks),
             "checkpoint": ConnectorSummary(name="c", role="checkpoint", connector_class="MirrorCheckpointConnector",
                                            state="RUNNING"),
             "heartbeat": ConnectorSummary(name="h", role="heartbeat", connector_class="MirrorHeartbeatConnector",
                                           state="RUNNING", tasks_running=1, tasks=["RUNNING"])}
    rows = [PartitionLag(topic=tp.topic, partition=tp.partition, remote_topic=f"A.{tp.topic}", high_watermark=100,
                         replicated_offset=99 - n, lag=n) for tp, n in (lag or {}).items()]
    return FlowStatus(flow="A->B", source="A", target="B", connect_cluster="B", state=state,
                      detailed_state=DetailedState(enabled=True, ready=True, allConnectorsRunning=True,
                                                   sourceTaskRunning=True),
                      connectors=conns, replicated_topics=["A.orders"], lag=rows,
                      total_lag=sum(r.lag for r in rows), max_lag=max((r.lag for r in rows), default=0))


def _health(**kw) -> FlowHealth:
    base = dict(flow="A->B", source="A", target="B", status=_status(), heartbeat_at=NOW, heartbeat_age_s=1.0,
                heartbeat_lookback_s=240.0)
    return FlowHealth(**{**base, **kw})


def test_scan_keeps_the_newest_heartbeat_per_pair_and_the_newest_checkpoint_per_group():
    def hb(s: str, t: str, at: datetime) -> Message:
        r = Heartbeat(s, t, _ms(at))
        return msg("heartbeats", r.key_bytes(), r.value_bytes(), _ms(at))

    def cp(g: str, p: int, up: int, at: datetime) -> Message:
        r = Checkpoint(g, "A.orders", p, up, up)
        return msg(CHECKPOINTS, r.key_bytes(), r.value_bytes(), _ms(at))

    old, new = NOW - timedelta(seconds=30), NOW - timedelta(seconds=2)
    msgs = [hb("A", "B", new), hb("A", "B", old), hb("C", "B", old),
            cp("g1", 0, 10, old), cp("g1", 0, 12, new), cp("g2", 1, 5, old),
            msg(CHECKPOINTS, b"\xff", b"", 0), msg("heartbeats", b"x", None, 0)]
    out = scan_target(msgs, {"heartbeats"}, {CHECKPOINTS}, TargetFreshness(cluster="B"))
    assert out.heartbeats == {("A", "B"): _ms(new), ("C", "B"): _ms(old)}
    log = out.checkpoints[CHECKPOINTS]
    upstream = {g: {(tp.topic, tp.partition): c.upstream_offset for tp, c in cps.items()}
                for g, cps in log.by_group().items()}
    assert log.newest_ms()["g1"] == _ms(new) and upstream["g1"] == {("A.orders", 0): 12}
    assert upstream["g2"] == {("A.orders", 1): 5}
    assert out.malformed == 2


def _target(upstream: dict[tuple[str, int], int], at: datetime) -> TargetFreshness:
    out = TargetFreshness(cluster="B", topics={"A.orders": 2})
    msgs = [msg(CHECKPOINTS, Checkpoint("g", t, p, up, up).key_bytes(),
                Checkpoint("g", t, p, up, up).value_bytes(), _ms(at)) for (t, p), up in upstream.items()]
    return scan_target(msgs, set(), {CHECKPOINTS}, out)


def test_an_idle_group_is_old_but_not_behind():
    target = _target({("A.orders", 0): 40}, NOW - timedelta(hours=3))
    [g] = group_checkpoints(FLOW, ".*", _status(), target, {"g": {TP("orders", 0): 40}}, None, NOW)
    assert g.age_s == 3 * 3600 and g.behind == [] and g.behind_for_s(NOW) is None


def test_behind_since_is_carried_only_while_no_newer_checkpoint_came():
    newest = NOW - timedelta(hours=1)
    target = _target({("A.orders", 0): 40}, newest)
    committed = {"g": {TP("orders", 0): 55, TP("not-replicated", 0): 9}}
    [first] = group_checkpoints(FLOW, ".*", _status(), target, committed, None, NOW)
    assert first.behind == ["orders-0"] and first.behind_since == NOW  # first seen behind: no history yet

    later = NOW + timedelta(minutes=5)
    sample = MetricsSample(flow="A->B", observed_at=NOW, metrics={"checkpoints": [first.sample(NOW)]})
    [again] = group_checkpoints(FLOW, ".*", _status(), target, committed, sample, later)
    assert again.behind_since == NOW and again.behind_for_s(later) == 300

    moved = _target({("A.orders", 0): 50}, later - timedelta(seconds=1))  # MM2 emitted a newer checkpoint
    [fresh] = group_checkpoints(FLOW, ".*", _status(), moved, committed, sample, later)
    assert fresh.behind_since == later


def test_groups_come_from_the_source_listing_filtered_by_the_managed_regex():
    target = _target({("A.orders", 0): 1}, NOW)
    committed = {"orders-app": {}, "billing": {}, "connect-A->B": {}}
    names = [g.group for g in group_checkpoints(FLOW, "orders-.*|connect-.*", _status(), target, committed, None, NOW)]
    assert names == ["orders-app"]  # plumbing groups never count


def test_thresholds_name_the_flow_and_the_figure():
    params = HealthParams(max_lag=10, max_heartbeat_age_s=60, max_checkpoint_age_s=120)
    assert evaluate(_health(), params, NOW) == []
    stale = GroupCheckpointHealth(group="g", age_s=900.0, behind=["orders-0"],
                                  behind_since=NOW - timedelta(seconds=300))
    lag = {TP("orders", 3): 11, TP("heartbeats", 0): 99}
    bad = _health(status=_status(state="NOT_REPLICATING", tasks=["FAILED"], lag=lag),
                  heartbeat_age_s=61.5, checkpoints=[stale], lock_holder="run r1 of DAG mm2_failover")
    out = evaluate(bad, params, NOW)
    assert out[0].startswith("flow A->B is NOT_REPLICATING (required REPLICATING): source RUNNING "
                             "(0 task(s) running, tasks FAILED)")
    assert "flow A->B: replication lag 11 records on orders-3 (max_lag=10; total 11)" in out[1]  # heartbeats excluded
    assert "flow A->B: newest heartbeat A->B is 61.5s old (max_heartbeat_age_s=60)" in out[2]
    assert "group g committed past its newest checkpoint on orders-0 and no newer checkpoint came for 300s" in out[3]
    assert all(v.endswith("[flow locked by run r1 of DAG mm2_failover]") for v in out)
    missing = evaluate(_health(heartbeat_at=None, heartbeat_age_s=None), params, NOW)
    assert missing == ["flow A->B: no heartbeat A->B on B's heartbeats topics within the last 240s "
                       "(max_heartbeat_age_s=60)"]


def test_only_failed_parts_of_running_or_failed_connectors_are_restarted():
    assert failed_roles(_status(tasks=["FAILED"])) == ["source"]
    assert failed_roles(_status(source="FAILED", tasks=[])) == ["source"]
    assert failed_roles(_status(source="PAUSED", tasks=["FAILED"])) == []  # an operator's pause is left alone
    assert failed_roles(_status()) == []


def test_params_from_a_form_and_their_errors():
    p = parse(HealthParams, {"flows": "", "restart_failed": "true", "max_lag": 5}, TOPOLOGY)
    assert p.flows == ".*" and p.restart_failed is True and p.select(TOPOLOGY) == [FLOW]
    with pytest.raises(InvalidParams, match="unknown parameter 'dry_run'"):  # the health check changes nothing
        parse(HealthParams, {"dry_run": True}, TOPOLOGY)
    with pytest.raises(InvalidParams, match=r'`flows` "X->Y" matches no flow; the topology defines: A->B'):
        parse(HealthParams, {"flows": "X->Y"}, TOPOLOGY)
    with pytest.raises(InvalidParams, match="Invalid parameter `max_lag`"):
        parse(HealthParams, {"max_lag": -1}, TOPOLOGY)


def test_the_metrics_sample_keeps_the_rpo_rows_and_lists_groups():
    cp = GroupCheckpointHealth(group="token-service", age_s=3.0, newest_at=NOW)
    m = _health(status=_status(lag={TP("orders", 0): 2}), checkpoints=[cp], hops=1).metrics(NOW)
    assert m["partitions"] == [{"topic": "orders", "partition": 0, "high_watermark": 100, "replicated_offset": 97,
                                "lag": 2, "log_start": None, "offset_lag": None, "lag_low": None}]
    assert m["checkpoints"][0]["group"] == "token-service" and m["checkpoint_age_s_max"] == 3.0
    assert m["hops"] == 1 and m["heartbeat_age_s"] == 1.0


def test_notifier_logs_posts_nothing_without_a_url_and_never_raises(monkeypatch, capsys):
    pytest.importorskip("airflow")
    from mirrorbook.airflow.notifiers import MirrorbookAlertNotifier

    monkeypatch.delenv("MIRRORBOOK_ALERT_WEBHOOK_URL", raising=False)
    MirrorbookAlertNotifier().notify({"exception": RuntimeError("flow A->B is DISABLED")})
    assert "ALERT None/None/None: flow A->B is DISABLED" in capsys.readouterr().out
    # An unreachable webhook is logged by host only (the URL may carry a token), and not raised.
    MirrorbookAlertNotifier(webhook_url="http://127.0.0.1:9/hook?token=abc", timeout_s=1).notify({})
    out = capsys.readouterr().out
    assert "could not post the alert to the webhook on 127.0.0.1:9" in out and "token=abc" not in out


@pytest.mark.parametrize("env,expect", [(None, "*/5 * * * *"), ("*/1 * * * *", "*/1 * * * *"), ("none", None)])
def test_the_schedule_comes_from_the_environment(monkeypatch, env, expect):
    pytest.importorskip("airflow")
    import runpy
    from pathlib import Path

    if env is None:
        monkeypatch.delenv("MIRRORBOOK_HEALTH_SCHEDULE", raising=False)
    else:
        monkeypatch.setenv("MIRRORBOOK_HEALTH_SCHEDULE", env)
    dag_file = Path(__file__).resolve().parents[2] / "dags" / "mm2_health_check.py"
    dag = runpy.run_path(str(dag_file))["dag"]
    assert dag.dag_id == "mm2_health_check" and dag.catchup is False and dag.max_active_runs == 1
    assert dag.schedule == expect


@pytest.mark.parametrize("flags", [
    (e, r, a, s) for e in (True, False, None) for r in (True, False, None) for a in (True, False, None)
    for s in (True, False, None)])
def test_the_kip_formula_on_known_flags_and_unknown_where_a_flag_is_not_known(flags):
    """KIP-1144's formula verbatim on known flags; a flag not known (the connectors could not be read) makes the
    state UNKNOWN — never DISABLED, which the formula would say of `enabled` not being true."""
    enabled, ready, running, source = flags
    state = DetailedState(enabled=enabled, ready=ready, allConnectorsRunning=running, sourceTaskRunning=source).state()
    if None in (enabled, running, source):
        assert state == FlowState.UNKNOWN
    elif not enabled:
        assert state == FlowState.DISABLED
    elif running and source:
        assert state == FlowState.REPLICATING
    elif source:
        assert state == FlowState.CONCERNING
    else:
        assert state == FlowState.NOT_REPLICATING


def test_a_flow_that_could_not_be_read_is_checked_cause_first():
    """Connect refused mirrorbook: the health check's first words are the refusal, then the flow's UNKNOWN state;
    its lag is not known, so no lag threshold is judged on it."""
    cause = ("Connect cluster B (https://connect-b:8443) refused the credentials of basic-auth user 'mirrorbook' "
             "([401] Unauthorized — a wrong username or password), on GET /connectors?expand=status&expand=info")
    unknown = {r: ConnectorSummary(name=r, role=r, connector_class=r, state="UNKNOWN", trace=cause)
               for r in ("source", "checkpoint", "heartbeat")}
    status = _status().model_copy(update={
        "state": FlowState.UNKNOWN, "connectors": unknown, "lag": [], "errors": [cause, "cluster A: down"],
        "unreadable": Unreadable(cause=cause, fix="set the login/password", refused=True),
        "detailed_state": DetailedState(enabled=None, ready=None, allConnectorsRunning=None, sourceTaskRunning=None)})
    out = evaluate(_health(status=status), HealthParams(), NOW)
    assert out == [f"{cause}; so flow A->B is UNKNOWN (required REPLICATING): its connectors could not be read; "
                   "cluster A: down"]
    assert status.kip1144_summary()["detailedState"] == {"enabled": None, "ready": None,
                                                         "allConnectorsRunning": None, "sourceTaskRunning": None}
