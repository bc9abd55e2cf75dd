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
# Everything this run starts inherits this marker (test brokers drop LAKELOG_* variables, so
# it is not one), whatever session or process group it moved to: the last sweep of
# `cleanup` stops whatever still carries it.
export LLTEST_RUN="$workdir"
pids=()      # servers started here (moto)
pytests=()   # pytest passes, stopped first so their fixtures stop their brokers
watchdog=""
cleaned=""

marked() {
  # PIDs of processes carrying this run's marker, this shell excepted.
  local file pid
  for file in $(grep -lzx "LLTEST_RUN=$workdir" /proc/[0-9]*/environ 2>/dev/null); do
    pid=${file#/proc/}
    pid=${pid%/environ}
    [ "$pid" != $$ ] && [ "$pid" != "$BASHPID" ] && echo "$pid"
  done
}

wait_gone() {  # wait_gone SECONDS PID...: until none is alive, or SECONDS have passed
  local tenths=$(($1 * 10)) pid alive
  shift
  while [ "$tenths" -gt 0 ]; do
    alive=""
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && return 0
    sleep 0.1
    tenths=$((tenths - 1))
  done
  return 1
}

cleanup() {
  set +e  # every step, whatever the one before did
  [ -n "$cleaned" ] && return
  cleaned=1
  # A second signal (make passes SIGTERM on to this shell, which got it already when the
  # whole group was signalled) must not cut the cleanup short.
  trap '' INT TERM HUP
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
  # pytest turns SIGTERM into KeyboardInterrupt (tests/support/reaper.py), so its fixtures
  # stop the brokers, clusters and servers they started; one still alive after 10 s is killed.
  if [ ${#pytests[@]} -gt 0 ]; then
    kill -TERM "${pytests[@]}" 2>/dev/null
    if ! wait_gone 10 "${pytests[@]}"; then
      echo "run-tests.sh: pytest still running 10 s after SIGTERM: SIGKILL" >&2
      kill -KILL "${pytests[@]}" 2>/dev/null
    fi
  fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  bash scripts/postgres.sh stop "$pgdir" || true
  # Whatever is left (a broker of a killed pytest, a Spark JVM, a test's own PostgreSQL):
  # SIGTERM, then SIGKILL after 3 s.
  local left
  left=$(marked)
  if [ -n "$left" ]; then
    echo "run-tests.sh: stopping what the tests left running:" >&2
    # shellcheck disable=SC2086
    ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" 2>/dev/null | cut -c1-160 >&2
    # shellcheck disable=SC2086
    kill -TERM $left 2>/dev/null || true
    # shellcheck disable=SC2086
    wait_gone 3 $left || true
    left=$(marked)
    # shellcheck disable=SC2086
    [ -z "$left" ] || kill -KILL $left 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  rm -rf "$workdir"
}
interrupted() {
  set +e
  echo "run-tests.sh: $1: stopping the tests and the servers they use" >&2
  cleanup
  trap - "$1" EXIT
  kill -s "$1" $$  # die of the signal, as callers (make, a shell) expect
  exit $((128 + $(kill -l "$1")))
}
trap cleanup EXIT
trap 'interrupted INT' INT
trap 'interrupted TERM' TERM
trap 'interrupted HUP' HUP

# `kill -INT <make's pid>` reaches make alone: make blocks the signal and waits for this
# script, which would run to the end. So while make waits here, watch whether it is
# handling a fatal signal (blocked in /proc/PID/status twice in a row), or gone, and stop.
if [ "$(cat /proc/$PPID/comm 2>/dev/null)" = make ]; then
  (
    make_pid=$PPID
    seen=0
    while sleep 0.5; do
      blocked=$(awk '/^SigBlk:/ {print $2}' /proc/$make_pid/status 2>/dev/null || true)
      # SIGHUP, SIGINT, SIGQUIT (bits 0-2) and SIGTERM (bit 14).
      if [ -z "$blocked" ] || [ $((0x$blocked & 0x4007)) -ne 0 ]; then
        seen=$((seen + 1))
      else
        seen=0
      fi
      if [ "$seen" -ge 2 ]; then
        kill -INT $$
        break
      fi
    done
  ) &
  watchdog=$!
fi

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

# Each pytest runs in the background and this shell `wait`s for it: a trapped signal
# interrupts `wait` at once (it would wait for a foreground command to finish first).
if [ $# -gt 0 ]; then
  # A chosen subset (development): no lint, so work in progress elsewhere cannot block it.
  $BIN/python -m pytest -q -p no:cacheprovider "$@" &
  pytests+=($!)
  subset_rc=0
  wait "${pytests[0]}" || subset_rc=$?
  exit "$subset_rc"
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
# The Spark standalone-cluster tests (PostgreSQL + S3 whatever the pass) ride with the
# shorter scale-out pass, so the two passes stay about as long as each other.
LAKELOG_TEST_BACKEND=scaleout $BIN/python -m pytest -q -p no:cacheprovider --durations=30 \
  --basetemp="$workdir/scaleout" tests/e2e tests/chaos tests/pipeline/test_spark_cluster.py \
  >"$workdir/scaleout.log" 2>&1 &
scaleout_pid=$!
pytests+=("$scaleout_pid")
$BIN/python -m pytest -q -p no:cacheprovider --durations=30 --basetemp="$workdir/embedded" \
  --ignore=tests/pipeline/test_spark_cluster.py &
embedded_pid=$!
pytests+=("$embedded_pid")
embedded_rc=0
wait "$embedded_pid" || embedded_rc=$?
scaleout_rc=0
wait "$scaleout_pid" || scaleout_rc=$?
echo "== end-to-end suites again on PostgreSQL + S3 (moto), and the Spark cluster tests, run alongside =="
cat "$workdir/scaleout.log"
echo "== embedded pass: exit $embedded_rc; PostgreSQL + S3 pass: exit $scaleout_rc =="
[ "$embedded_rc" = 0 ] && [ "$scaleout_rc" = 0 ]
