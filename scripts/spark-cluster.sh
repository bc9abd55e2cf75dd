#!/usr/bin/env bash
# A throwaway Spark standalone cluster for tests: one master and N workers (one core each),
# separate JVMs started from the pip-installed pyspark, on loopback only.
#
#   scripts/spark-cluster.sh start DIR [WORKERS]   start them (logs, pids and work dirs in
#                                                  DIR), wait until every worker registered,
#                                                  and print the master URL spark://127.0.0.1:PORT
#   scripts/spark-cluster.sh stop DIR              stop them and remove DIR
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}

die() { echo "spark-cluster.sh: $*" >&2; exit 1; }

free_port() {
  # Below the ephemeral range, as tests/support/ports.py picks (a client connection cannot
  # take it between this pick and the JVM's bind).
  "$PY" -c 'from tests.support.ports import free_port; print(free_port())'
}

start() {
  local dir=$1 workers=${2:-2} home master_port ui_port i waited alive
  mkdir -p "$dir"
  home=$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))') ||
    die "pyspark is not installed in $PY (pip install 'lakelog[spark]')"
  export SPARK_HOME=$home SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=127.0.0.1
  master_port=$(free_port)
  ui_port=$(free_port)
  "$home/bin/spark-class" org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$master_port" --webui-port "$ui_port" \
    >"$dir/master.log" 2>&1 </dev/null &
  echo $! >"$dir/master.pid"
  echo "$ui_port" >"$dir/master.ui"
  for i in $(seq 1 "$workers"); do
    mkdir -p "$dir/work$i"
    "$home/bin/spark-class" org.apache.spark.deploy.worker.Worker \
      --host 127.0.0.1 --cores 1 --memory 2g --webui-port "$(free_port)" \
      --work-dir "$dir/work$i" "spark://127.0.0.1:$master_port" \
      >"$dir/worker$i.log" 2>&1 </dev/null &
    echo $! >"$dir/worker$i.pid"
  done
  for waited in $(seq 1 240); do
    alive=$(curl -sf "http://127.0.0.1:$ui_port/json/" 2>/dev/null |
      "$PY" -c 'import json, sys; print(json.load(sys.stdin).get("aliveworkers", 0))' 2>/dev/null || echo 0)
    if [ "$alive" -ge "$workers" ]; then
      echo "spark://127.0.0.1:$master_port"
      return 0
    fi
    sleep 0.5
  done
  tail -20 "$dir"/*.log >&2 || true
  stop "$dir"
  die "the cluster did not come up in 120 s"
}

stop() {
  local dir=$1 file pids=()
  [ -d "$dir" ] || return 0
  for file in "$dir"/*.pid; do
    [ -f "$file" ] && pids+=("$(cat "$file")")
  done
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 40); do
      kill -0 "${pids[@]}" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  # Executors the workers started (they run as children of the workers, in DIR/work*).
  pkill -KILL -f -- "$dir/work" 2>/dev/null || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start "$2" "${3:-2}" ;;
  stop) stop "$2" ;;
  *) die "usage: $0 start DIR [WORKERS] | stop DIR" ;;
esac
