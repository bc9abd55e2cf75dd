#!/usr/bin/env bash
# Installs the system tools tests need, starts the servers they use, runs the whole suite,
# and stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

need_apt=()
# Headless Chromium and its WebDriver (same Debian release, so their versions match), for
# the web console tests in tests/console.
command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium chromium-driver)
# promtool (in Debian's prometheus package), which checks deploy/'s alert rules and the
# Grafana dashboard's queries in tests/deploy.
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# PostgreSQL server binaries, for the coordinator contract tests' postgres backend.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

workdir=$(mktemp -d /tmp/lakelog-test.XXXXXX)
pgdir=$(mktemp -d /tmp/lakelog-pg.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  bash scripts/postgres.sh stop "$pgdir" || true
  rm -rf "$workdir"
}
trap cleanup EXIT

# moto's S3 server over HTTP on loopback, for the s3:// storage tests.
moto_port=$($BIN/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
$BIN/python scripts/moto_server.py 127.0.0.1 "$moto_port" >"$workdir/moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  if $BIN/python -c "import socket; socket.create_connection(('127.0.0.1', $moto_port), 0.2)" 2>/dev/null; then break; fi
  sleep 0.1
done
export LAKELOG_TEST_S3_ENDPOINT="http://127.0.0.1:$moto_port"

# A throwaway PostgreSQL server on loopback (fsync off), for the postgres contract tests:
# with the URL set they run against it and never skip.
pg_port=$($BIN/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LAKELOG_TEST_POSTGRES_URL=$(bash scripts/postgres.sh start "$pgdir" "$pg_port")
export LAKELOG_TEST_POSTGRES_URL

# Spark start-up files (lakelog.spark.jvm_cache, python_launcher): this run's, not the user's.
export LAKELOG_SPARK_CACHE="$workdir/spark-cache"

if [ $# -gt 0 ]; then
  # A chosen subset (development): no lint, so work in progress elsewhere cannot block it.
  $BIN/python -m pytest -q -p no:cacheprovider "$@"
  exit 0
fi
$BIN/ruff check --no-cache src tests bench
# No import cycle among lakelog's modules, lazy imports included (scripts/check_imports.py).
$BIN/python scripts/check_imports.py
# Everything on the embedded defaults (SQLite + local files; the contract suite runs on both
# coordinators), and at the same time the end-to-end suites again on the scale-out parts:
# PostgreSQL + S3. The suite mostly waits (brokers, clients, timeouts: about half a core on
# average), so the two passes side by side take about as long as the longer one. Each has
# its own temp dir; the scale-out pass prints when the embedded one is done.
mkdir -p "$workdir/embedded" "$workdir/scaleout"
LAKELOG_TEST_BACKEND=scaleout $BIN/python -m pytest -q -p no:cacheprovider --durations=30 \
  --basetemp="$workdir/scaleout" tests/e2e tests/chaos >"$workdir/scaleout.log" 2>&1 &
scaleout_pid=$!
pids+=("$scaleout_pid")
embedded_rc=0
$BIN/python -m pytest -q -p no:cacheprovider --durations=30 --basetemp="$workdir/embedded" \
  || embedded_rc=$?
scaleout_rc=0
wait "$scaleout_pid" || scaleout_rc=$?
echo "== end-to-end suites again on PostgreSQL + S3 (moto), run alongside =="
cat "$workdir/scaleout.log"
echo "== embedded pass: exit $embedded_rc; PostgreSQL + S3 pass: exit $scaleout_rc =="
[ "$embedded_rc" = 0 ] && [ "$scaleout_rc" = 0 ]
