"""The `mirrorbook` command line."""

from __future__ import annotations

import argparse
import logging
import sys

import mirrorbook
from mirrorbook.errors import MirrorbookError


def build_parser() -> argparse.ArgumentParser:
    from mirrorbook.audit import cli as audit_cli
    from mirrorbook.devstack import cli as devstack_cli
    from mirrorbook.mm2 import flows_cli

    parser = argparse.ArgumentParser(prog="mirrorbook", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--version", action="version", version=f"%(prog)s {mirrorbook.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    devstack_cli.register(sub)
    __import__("mirrorbook.mm2.cli", fromlist=["register"]).register(sub)  # mirrorbook translate
    audit_cli.register(sub)
    flows_cli.register(sub)
    __import__("mirrorbook.demo", fromlist=["register"]).register(sub)  # mirrorbook demo
    __import__("mirrorbook.trigger", fromlist=["register"]).register(sub)  # mirrorbook trigger
    __import__("mirrorbook.reports.drill_cli", fromlist=["register"]).register(sub)  # mirrorbook drill
    __import__("mirrorbook.dag_files", fromlist=["register"]).register(sub)  # mirrorbook dags
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except MirrorbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
