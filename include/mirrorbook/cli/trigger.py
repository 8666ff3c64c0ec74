"""`mirrorbook trigger`: trigger a runbook DAG through Airflow's REST API (`mirrorbook.trigger`), and wait for it."""

from __future__ import annotations

import argparse
import json
import os
import sys

from pydantic import SecretStr

from mirrorbook.trigger import (DEFAULT_URL, ENV_PASSWORD, ENV_URL, ENV_USER, AirflowApi, Credentials, TriggerError,
                                new_run_id, parse_conf)
from mirrorbook import trigger as library


def register(p: argparse.ArgumentParser) -> None:
    p.description, p.formatter_class = library.__doc__, argparse.RawDescriptionHelpFormatter
    p.add_argument("dag_id", metavar="DAG_ID", help="e.g. mm2_failover")
    p.add_argument("--conf", default="{}", help="the run's conf: a JSON object, or @path to a JSON file")
    p.add_argument("--run-id", help="explicit dag_run_id (default: mirrorbook__<UTC time>__<random>); "
                                    "repeating a run id waits on that run instead of starting another")
    p.add_argument("--wait", action="store_true", help="poll the run until it ends; exit 1 unless it succeeded")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait waits (default: 3600)")
    p.add_argument("--poll", type=float, default=2.0, help="seconds between polls (default: 2)")
    p.add_argument("--url", default=os.environ.get(ENV_URL, DEFAULT_URL),
                   help=f"Airflow API server (default: ${ENV_URL}, else {DEFAULT_URL})")
    p.add_argument("--user", default=os.environ.get(ENV_USER), help=f"Airflow user (default: ${ENV_USER})")
    p.add_argument("--password", help=f"Airflow password (prefer ${ENV_PASSWORD}: arguments show in ps)")
    p.set_defaults(func=cmd_trigger)


def credentials(args: argparse.Namespace) -> Credentials:
    password = args.password if args.password is not None else os.environ.get(ENV_PASSWORD)
    if not args.user:
        raise TriggerError("no Airflow user", f"pass --user or set ${ENV_USER}")
    if password is None:
        raise TriggerError(f"no password for Airflow user {args.user!r}", f"set ${ENV_PASSWORD} (or --password)")
    return Credentials(username=args.user, password=SecretStr(password))


def cmd_trigger(args: argparse.Namespace) -> int:
    conf = parse_conf(args.conf, args.dag_id)
    creds = credentials(args)
    run_id = args.run_id or new_run_id()
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731 - progress on stderr, result on stdout
    with AirflowApi(args.url) as api:
        api.login(creds)
        if api.unpause(args.dag_id):
            say(f"unpaused DAG {args.dag_id}")
        run, created = api.trigger(args.dag_id, run_id, conf)
        say(f"{'triggered' if created else 'already triggered'} {args.dag_id} run {run.dag_run_id} "
            f"as {creds.username}: {run.state}")
        if args.wait and not run.done:
            run = api.wait(args.dag_id, run_id, args.timeout, args.poll,
                           on_change=lambda r: say(f"run {r.dag_run_id}: {r.state}"), seen=run.state)
    print(json.dumps({"dag_id": run.dag_id, "dag_run_id": run.dag_run_id, "state": run.state,
                      "created": created, "url": f"{args.url.rstrip('/')}/dags/{run.dag_id}/runs/{run.dag_run_id}"}))
    return 0 if not args.wait or run.state == "success" else 1
