#!/usr/bin/env bash
# Interrupt `make test` and list what it left running (run by hand, not part of `make test`).
#
#   scripts/check-interrupt.sh [SIGNAL] [DELAY] [TARGET]
#
# Starts `make test` in a session of its own, sends SIGNAL (INT or TERM; default INT) after
# DELAY seconds (default 60) to TARGET: `group` (default; make's whole process group, as
# Ctrl-C does) or `make` (make's process alone, as `kill -INT <make pid>`). Then waits for make
# to exit (at most 120 s), waits 20 s more and prints every process of the run still alive:
# any carrying this check's marker in its environment, or with its working directory or
# command line in this repository or in the run's temp dir (LLTEST_RUN). Exits 1 if there is
# any (it kills nothing itself), 0 if none. make's output goes to $LOG (default
# /tmp/check-interrupt.<pid>.log).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
sig=${1:-INT}
delay=${2:-60}
target=${3:-group}
case "$sig" in INT | TERM) ;; *) echo "SIGNAL is INT or TERM" >&2; exit 2 ;; esac
case "$target" in group | make) ;; *) echo "TARGET is group or make" >&2; exit 2 ;; esac
log=${LOG:-/tmp/check-interrupt.$$.log}
mark="check-interrupt-$$-$RANDOM"

# The marker is inherited by make and everything below it. An async command of a
# non-interactive shell ignores SIGINT: undo that, so make handles it as at a terminal.
(
  trap - INT QUIT
  export CHECK_INTERRUPT_MARK="$mark"
  exec setsid make test
) >"$log" 2>&1 &
make_pid=$!
started_at() {  # a process's start time, in clock ticks since boot (field 22 of its stat)
  sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'
}
make_start=$(started_at "$make_pid")
echo "make test: pid $make_pid (its own session and process group); output in $log"
sleep "$delay"
if ! kill -0 "$make_pid" 2>/dev/null; then
  echo "make test ended before the signal (see $log)" >&2
  exit 2
fi
# This run's temp dir: run-tests.sh exports it as LLTEST_RUN to everything it starts.
run_dirs=$(grep -lzx "CHECK_INTERRUPT_MARK=$mark" /proc/[0-9]*/environ 2>/dev/null \
  | xargs -r cat 2>/dev/null | tr '\0' '\n' | sed -n 's/^LLTEST_RUN=//p' | sort -u)
echo "the run's temp dir: ${run_dirs:-(none found)}"
if [ "$target" = group ]; then
  echo "$(date -u +%T) kill -$sig -- -$make_pid   (make's process group)"
  kill "-$sig" -- "-$make_pid"
else
  echo "$(date -u +%T) kill -$sig $make_pid   (make alone)"
  kill "-$sig" "$make_pid"
fi
for _ in $(seq 1 240); do
  kill -0 "$make_pid" 2>/dev/null || break
  sleep 0.5
done
wait "$make_pid" 2>/dev/null
make_rc=$?
if kill -0 "$make_pid" 2>/dev/null; then
  echo "$(date -u +%T) make is still running 120 s after the signal"
else
  echo "$(date -u +%T) make exited with $make_rc"
fi
sleep 20

# Not this script nor the shells above it (their working directory may be this repo).
cd /
skip=" $$ "
pid=$$
while [ "$pid" -gt 1 ]; do
  pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 1)
  skip+="$pid "
done
ours() {
  local dir pid cwd cmd d start dirs=("$repo" $run_dirs)
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [[ "$skip" == *" $pid "* || "$pid" = "$BASHPID" ]] && continue
    # Older than make: not the run's (a shell someone left in this repo, say).
    start=$(started_at "$pid") || continue
    [[ -n "$start" && "$start" -lt "$make_start" ]] && continue
    if grep -qzx "CHECK_INTERRUPT_MARK=$mark" "$dir/environ" 2>/dev/null; then
      echo "$pid"
      continue
    fi
    cwd=$(readlink "$dir/cwd" 2>/dev/null) || continue
    cmd=$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null)
    for d in "${dirs[@]}"; do
      if [[ "$cwd" == "$d" || "$cwd" == "$d"/* || "$cmd" == *"$d"* ]]; then
        echo "$pid"
        break
      fi
    done
  done
}
left=$(ours | sort -n | tr '\n' ' ' | sed 's/ *$//')
echo "$ ps -eo pid,pgid,etime,cmd | grep -E 'lakelog|postgres|moto|pytest|spark' | grep -v grep"
echo "  (only this run's: its marker in the environment, cwd or command line in $repo or ${run_dirs:-its temp dir})"
if [ -z "$left" ]; then
  echo "nothing left"
  exit 0
fi
# shellcheck disable=SC2086
ps -o pid,pgid,etime,cmd -p ${left// /,}
echo "LEFT RUNNING: $left (not killed: look, then kill them by pid)"
exit 1
