"""The README's commands, as written: a newcomer copies them, so they must be what the code accepts.

- every `mirrorbook …` line in a command block parses with the CLI's own parser (synopsis brackets
  `[--flag]` and `a | b` alternatives are read as the options and commands they name);
- the local-Airflow recipe's exports, run by bash as written, give an Airflow that loads the repo's
  plugin (the flows API and page) and DAGs, and imports mirrorbook's task modules as it starts (the recipe's
  airflow_local_settings.py) — the long-running `airflow standalone` is the one word
  replaced, by `airflow plugins`, which loads the same plugins folder and exits.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from mirrorbook.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def _lines(block: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", block)
    return [ln.split(" #", 1)[0].strip() for ln in joined.splitlines() if ln.strip()]


def _cli_commands() -> list[str]:
    out: list[str] = []
    for block in BLOCKS:
        for line in _lines(block):
            if not line.startswith("mirrorbook "):
                continue
            line = re.sub(r"\[([^\]]*)\]", r"\1", line)
            first, *alternatives = [part.strip() for part in line.split(" | ")]
            out.append(first)
            prefix = " ".join(first.split()[:2])
            out += [f"{prefix} {alt}" for alt in alternatives]
    return out


def _json_list(output: str) -> list[dict]:
    """The JSON line of a CLI's output (Airflow prints its warnings on stdout too)."""
    return json.loads(next(ln for ln in output.splitlines() if ln.startswith("[")))


def test_the_readme_has_command_blocks_to_check() -> None:
    assert len(_cli_commands()) >= 10 and any("airflow standalone" in b for b in BLOCKS)


@pytest.mark.parametrize("command", _cli_commands())
def test_every_mirrorbook_command_in_the_readme_parses(command: str) -> None:
    argv = shlex.split(command)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse's way of saying "no such command or option"
        pytest.fail(f"README command does not parse: {command!r} (exit {exc.code})")


def test_the_local_airflow_recipe_loads_the_plugin_and_the_dags(tmp_path: Path) -> None:
    block = next(b for b in BLOCKS if "airflow standalone" in b)
    assert block.count("airflow standalone") == 1
    # $PWD is a checkout: the repo's folders, seen from a scratch directory so the test leaves no .airflow here.
    for name in ("dags", "plugins", ".venv"):
        (tmp_path / name).symlink_to(REPO / name)
    script = block.replace("airflow standalone", "airflow db migrate >/dev/null && airflow plugins --output json && echo @@ && "
                                                 "airflow dags list --local --output json --columns dag_id && echo @@ && "
                                                 "python -c 'import airflow, sys; print(sorted(sys.modules))'")
    proc = subprocess.run(["bash", "-euc", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    plugins_out, dags_out, modules_out = proc.stdout.split("@@")
    # Airflow imported the recipe's local settings, and with them every module a runbook's task uses.
    assert "'mirrorbook.airflow.operators.move'" in modules_out and "'mirrorbook.runbooks.move'" in modules_out
    plugins = {p["name"]: p for p in _json_list(plugins_out)}
    assert "mirrorbook" in plugins, proc.stdout
    assert [a["url_prefix"] for a in plugins["mirrorbook"]["fastapi_apps"]] == ["/mirrorbook"]
    assert {d["dag_id"] for d in _json_list(dags_out)} >= {"mm2_failover", "mm2_failback", "mm2_offsets",
                                                           "mm2_pause_resume", "mm2_health_check", "dr_drill"}
