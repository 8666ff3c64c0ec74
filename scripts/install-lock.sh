#!/usr/bin/env bash
# Installs the pinned dependency set (requirements.lock) into the virtualenv VENV, made if missing:
#   scripts/install-lock.sh VENV
# Used by scripts/bootstrap.sh (the checkout's .venv) and by the test that installs the wheel into a fresh venv
# (tests/install.py): one recipe, so the two cannot drift.
set -euo pipefail
venv=${1:?usage: install-lock.sh VENV}
lock="$(cd "$(dirname "$0")/.." && pwd)/requirements.lock"
[[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -r "$lock"
# apache-airflow-providers-apache-spark requires pyspark-client, which ships its own copy of the `pyspark` package
# (4.2.0) and overwrites pyspark 4.3.0's files: put pyspark 4.3.0's back.
"$venv/bin/pip" install -q --no-deps --force-reinstall "$(grep -E '^pyspark==' "$lock")"
