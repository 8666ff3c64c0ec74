"""`mirrorbook devstack …` subcommands."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, get_args

from mirrorbook.booleans import parse_bool
from mirrorbook.maven import versions
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.mm2.internal_topics import OffsetSyncsLocation
from mirrorbook.topology import PolicyName

MM2_FLAGS = {
    "checkpoint_interval": "checkpoint_interval_s",
    "heartbeat_interval": "heartbeat_interval_s",
    "refresh_interval": ("refresh_topics_interval_s", "refresh_groups_interval_s"),
    "offset_lag_max": "offset_lag_max",
    "sync_group_offsets": "sync_group_offsets",
    "replication_policy": "replication_policy",
    "offset_syncs_location": "offset_syncs_location",
}


def register(p: argparse.ArgumentParser) -> None:
    ds = p.add_subparsers(dest="devstack_cmd", required=True)

    def common(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sp.add_argument("--run-dir", help="state, data and logs of this stack (default: one per user)")
        return sp

    up = common(ds.add_parser("up", help="start (or reconcile) the stack; a no-op when it runs"))
    up.add_argument("--reverse", action="store_true", default=None, help="also run the B->A flow on a worker on A")
    up.add_argument("--spark", action="store_true", default=None,
                    help="also a Spark Connect server (pyspark's own, local[*], on 127.0.0.1) for the parity "
                         "proofs; written to airflow-connections.json as spark_connect_default")
    up.add_argument("--spark-driver-mb", type=int, default=None,
                    help="the Spark Connect server's driver memory in MB (default 1024; the proofs of a failover of "
                         "1,000 groups x 150,000 group-partitions ran with 3072, not with 1024)")
    up.add_argument("--spark-workers", type=int, default=None, metavar="N",
                    help="run the Spark Connect server on a Spark standalone cluster of the stack's own, on "
                         "127.0.0.1: a master and N workers (1-4), an executor of the machine's cores on each "
                         "(implies --spark; 0: local[*], the default). Chosen while the server is down")
    up.add_argument("--secure", action="store_true", default=None,
                    help="SASL_SSL brokers (SCRAM-SHA-512, ACLs per principal), Connect on HTTPS with basic auth; "
                         "a throwaway CA and the secrets in 0600 files of the run dir, the secrets only in "
                         "airflow-connections.json (chosen at the stack's first up)")
    up.add_argument("--brokers", action="append", metavar="[ALIAS=]N", type=brokers_arg,
                    help="brokers per cluster (default 1), or of one cluster (B=3; repeatable); with 3 or more the "
                         "first three are the cluster's KRaft controller quorum, and every topic on it (internal ones, "
                         "MM2's and Connect's too) has min(3, N) replicas (chosen at the stack's first up)")
    up.add_argument("--port-base", type=int, help="use consecutive ports from BASE instead of free ones (6 with one "
                                                  "broker a cluster, 14 with three; the Spark Connect server takes "
                                                  "a free one)")
    up.add_argument("--checkpoint-interval", type=int, help="emit.checkpoints.interval.seconds (default 5)")
    up.add_argument("--heartbeat-interval", type=int, help="emit.heartbeats.interval.seconds (default 1)")
    up.add_argument("--refresh-interval", type=int, help="refresh.topics/groups.interval.seconds (default 5)")
    up.add_argument("--offset-lag-max", type=int, help="offset.lag.max (default 100)")
    up.add_argument("--sync-group-offsets", choices=["true", "false"], help="sync.group.offsets.enabled")
    up.add_argument("--replication-policy", choices=get_args(PolicyName))
    up.add_argument("--offset-syncs-location", choices=get_args(OffsetSyncsLocation),
                    help="offset-syncs.topic.location (default source, MM2's default). A DR flow should use "
                         "target (KIP-716): the syncs then survive the loss of the source cluster, and an "
                         "unplanned failover can translate with them")
    up.add_argument("--timeout", type=float, default=180.0)
    up.set_defaults(func=cmd_up)

    st = common(ds.add_parser("status", help="brokers, Connect, flows and connector states"))
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)

    dn = common(ds.add_parser("down", help="stop exactly the processes this stack started"))
    dn.add_argument("--purge", action="store_true", help="also delete data, logs and state")
    dn.set_defaults(func=cmd_down)

    for name, func, helptext in (("stop", cmd_stop,
                                  "take one cluster down, its brokers and its Connect worker (data kept)"),
                                 ("start", cmd_start, "bring a stopped cluster's brokers (and worker) back")):
        sp = common(ds.add_parser(name, help=helptext))
        sp.add_argument("alias", help="cluster alias, e.g. A")
        sp.add_argument("--broker", type=int, metavar="ID",
                        help=f"{name} only this broker of the cluster (its node id, 1..N); the others and the "
                             "Connect worker keep running")
        if name == "stop":
            sp.add_argument("--kill", action="store_true", help="SIGKILL (a crash) instead of a clean shutdown")
            sp.add_argument("--broker-only", action="store_true",
                            help="leave the Connect worker that runs against this cluster up")
        sp.set_defaults(func=func)

    fe = ds.add_parser("fetch", help="download the pinned Kafka (and Spark Kafka source) jars into the cache")
    fe.add_argument("--spark", action="store_true", help="also Spark's Kafka source (record parity)")
    fe.set_defaults(func=cmd_fetch)

    ld = common(ds.add_parser("load", help="create topics, produce sequence-numbered records, park groups"))
    target = ld.add_mutually_exclusive_group()
    target.add_argument("--cluster", default="A", help="cluster alias of this devstack (default A)")
    target.add_argument("--bootstrap", help="any bootstrap servers instead of a devstack cluster")
    ld.add_argument("--topic", action="append", dest="topic_names", help="topic name (repeatable)")
    ld.add_argument("--topics", type=int, default=1, help="number of topics named PREFIX-N when --topic is absent")
    ld.add_argument("--prefix", default="orders")
    ld.add_argument("--partitions", type=int, default=3)
    ld.add_argument("--records", type=int, default=1000, help="records per partition")
    ld.add_argument("--pad", type=int, default=0, help="extra bytes per value")
    ld.add_argument("--transactions", type=int, default=0, metavar="N",
                    help="write in N transactions of --records records per partition each (an exactly-once "
                         "producer: markers take offsets)")
    ld.add_argument("--abort-every", type=int, default=0, metavar="K", help="with --transactions: abort every K-th")
    ld.add_argument("--group", action="append", default=[], metavar="NAME=POS",
                    help="park a group: end | end-N | N | begin | none (repeatable)")
    ld.set_defaults(func=cmd_load)


def brokers_arg(text: str) -> tuple[str | None, int]:
    """`--brokers 3` (every cluster) or `--brokers B=3` (cluster B)."""
    alias, _, count = text.rpartition("=")
    try:
        return alias or None, int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a count (3) or a cluster and its count (B=3)") from None


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    mm2: dict[str, Any] = {}
    for flag, field in MM2_FLAGS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        if flag == "sync_group_offsets":
            value = parse_bool(value)
        for f in field if isinstance(field, tuple) else (field,):
            mm2[f] = value
    out: dict[str, Any] = {"mm2": mm2} if mm2 else {}
    for flag in ("reverse", "spark", "secure"):
        if getattr(args, flag):
            out[flag] = True
    for alias, n in args.brokers or []:
        if alias is None:
            out["brokers"] = n
        else:
            out.setdefault("brokers_of", {})[alias] = n
    if args.spark_driver_mb is not None:
        out["spark_driver_memory_mb"] = args.spark_driver_mb
    if args.spark_workers is not None:
        out["spark_workers"] = args.spark_workers
    return out


def cmd_up(args: argparse.Namespace) -> int:
    stack = DevStack(args.run_dir)
    overrides = _overrides(args)
    t0 = time.monotonic()
    result = stack.up(port_base=args.port_base, overrides=overrides, timeout_s=args.timeout)
    status = stack.status()
    if result["already_running"]:
        print(f"devstack already running in {stack.run_dir} (nothing to do)")
    else:
        print(f"devstack up in {time.monotonic() - t0:.1f}s (started: {', '.join(result['started']) or 'none'}; "
              f"connectors configured: {len(result['connectors_configured'])})")
    _print_status(status)
    return 0


def _print_status(status: dict[str, Any]) -> None:
    sec = status.get("security") or {}
    print(f"  security: kafka {sec.get('kafka')}, connect {sec.get('connect')}"
          + (f", CA {sec['ca']}" if sec.get("ca") else ""))
    for alias, c in status["clusters"].items():
        if len(c["brokers"]) == 1:
            print(f"  cluster {alias}: {c['bootstrap_servers']}  pid={c['pid']} {'up' if c['alive'] else 'DOWN'}")
            continue
        print(f"  cluster {alias}: {c['bootstrap_servers']}")
        for b in c["brokers"]:
            print(f"    broker {b['node_id']}{' (controller)' if b['controller'] else ''}: {b['bootstrap_servers']}  "
                  f"pid={b['pid']} {'up' if b['alive'] else 'DOWN'}")
    for alias, w in status["connect"].items():
        print(f"  connect on {alias}: {w['url']}  pid={w['pid']} {'up' if w['alive'] else 'DOWN'}")
    if status.get("spark_connect"):
        sc = status["spark_connect"]
        print(f"  spark connect: {sc['url']} ({sc['master']})  pid={sc['pid']} {'up' if sc['alive'] else 'DOWN'}  "
              f"connection {sc['connection_id']}" + (f"  status API {sc['ui']}/api/v1" if sc.get("ui") else ""))
        for n in sc.get("cluster") or []:
            print(f"    {n['name']}: {n['url']} (UI {n['ui']})  pid={n['pid']} {'up' if n['alive'] else 'DOWN'}")
        if sc.get("executor_logs"):
            print(f"    executors' logs: {sc['executor_logs']}/<application>/<executor>/")
    for f in status["flows"]:
        print(f"  flow {f['name']}:")
        for name, c in f["connectors"].items():
            print(f"    {name}: {c['state']} tasks={c['tasks']}")
    print(f"  topology: {status['topology']}")


def cmd_status(args: argparse.Namespace) -> int:
    status = DevStack(args.run_dir).status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        _print_status(status)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    stopped = DevStack(args.run_dir).down(purge=args.purge)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}" + (" (data purged)" if args.purge else ""))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    done = DevStack(args.run_dir).stop_cluster(args.alias, kill=args.kill, broker_only=args.broker_only,
                                               broker=args.broker)
    print(f"{_what(args)}: {'stopped' if done else 'was not running'}")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    done = DevStack(args.run_dir).start_cluster(args.alias, broker=args.broker)
    print(f"{_what(args)}: {'started' if done else 'already running'}")
    return 0


def _what(args: argparse.Namespace) -> str:
    return f"cluster {args.alias}" + (f" broker {args.broker}" if args.broker is not None else "")


def cmd_load(args: argparse.Namespace) -> int:
    if args.bootstrap:
        target: str | dict[str, Any] = args.bootstrap
    else:
        # On a secured stack the workload is the `app` principal's, as an application's would be.
        target = DevStack(args.run_dir).require().kafka_config(args.cluster, "app")
    topics = args.topic_names or [f"{args.prefix}-{i}" for i in range(args.topics)]
    report = load(target, topics, args.partitions, args.records, [GroupSpec.parse(g) for g in args.group],
                  pad=args.pad, transactions=args.transactions, abort_every=args.abort_every)
    print(report.model_dump_json(indent=2))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from mirrorbook.devstack import artifacts
    from mirrorbook.maven import spark_kafka_libs

    print(f"kafka {versions.KAFKA_VERSION}: {artifacts.kafka_libs()}")
    if args.spark:
        print(f"spark-sql-kafka {versions.SPARK_KAFKA_VERSION}: {spark_kafka_libs()}")
    return 0
