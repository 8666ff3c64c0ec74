#!/usr/bin/env bash
# Installs everything mirrorbook needs on a fresh Debian machine, idempotently:
#   system packages (Java 17, Maven; PostgreSQL and Chromium with --test), the venv at $VENV from
#   requirements.lock, mirrorbook itself (editable), and the Kafka/Spark jars from Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
WITH_TEST=0
[[ "${1:-}" == "--test" ]] && WITH_TEST=1

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

apt_install() {
  local missing=("$@")
  [[ ${#missing[@]} -eq 0 ]] && return 0
  say "installing Debian packages: ${missing[*]}"
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || true
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

pkgs=()
command -v java >/dev/null 2>&1 || [[ -x "${JAVA_HOME:-/nonexistent}/bin/java" ]] || pkgs+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
if [[ $WITH_TEST -eq 1 ]]; then
  [[ -x /usr/lib/postgresql/15/bin/postgres ]] || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || pkgs+=(postgresql)
  # Debian's Chromium renders the plugin page headless in tests/e2e (no browser download).
  command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
fi
apt_install "${pkgs[@]}"

if [[ $WITH_TEST -eq 1 ]]; then
  profile=$(mktemp -d)
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$profile" \
      --dump-dom 'data:text/html,<p>headless-ok</p>' 2>/dev/null | grep -q headless-ok \
    || { echo "chromium is installed but cannot render headless" >&2; rm -rf "$profile"; exit 1; }
  rm -rf "$profile"
fi

stamp="$VENV/.mirrorbook-installed"
want="$(cat requirements.lock pyproject.toml setup.py | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  say "creating the virtualenv $VENV from requirements.lock"
  scripts/install-lock.sh "$VENV"
  "$VENV/bin/pip" install -q --no-deps -e .
  "$VENV/bin/pip" check
  echo "$want" > "$stamp"
fi

say "fetching Kafka (and Spark's Kafka source) jars from Maven Central into the cache"
"$VENV/bin/mirrorbook" devstack fetch --spark
