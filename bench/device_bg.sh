#!/usr/bin/env bash
# One long piece of GPU work in a process of its own on the device machine, followed call by
# call, so a session's device time goes to the work and not to cutting it into call-sized
# pieces (restarting workers, rebuilding, a test cut at a group's wall limit and run again).
#
#   source scripts/device_env.sh; bash bench/device_bg.sh start NAME -- COMMAND [ARGS...]
#   bash bench/device_bg.sh watch NAME      # at once after each call ends (below)
#   bash bench/device_bg.sh stop NAME
#
# `start` runs COMMAND under setsid (the device README: a process in a new session runs on
# until the machine goes back) with `timeout ${BG_BUDGET_S:-1500}`, and returns within seconds.
# COMMAND runs in the repository with OUT set to the job's own folder, $BG_ROOT/NAME/out, and its
# stdout and stderr go to $BG_ROOT/NAME/log; its exit status goes to $BG_ROOT/NAME/rc.
# `watch` follows the job for at most WATCH_S seconds (default 540; keep it under the call's
# limit) and every 10 s copies into the call's $OUT two files: bg_NAME.log (the job's log) and
# bg_NAME.tar.gz (its out/ folder, rc included once it ended), so a call cut by its limit still
# brings back what the job wrote. It ends when the job ends and exits with the job's status
# (0 while the job still runs, with a line saying so). The machine goes back after 30 s idle
# (device README): fire the next `watch` at once, or the job dies with the machine; a lost
# machine loses only what the job wrote since the last watch's copy. Each call also copies the
# working tree onto the machine anew, dropping files the job wrote inside it that git does not
# ignore: write outside the tree (to $OUT, /root/...); the job gets BG_JOB=NAME, on which
# bench_suite.sh moves runs that lie inside the tree to a copy outside it. Merge a bench_suite
# job's bg_NAME.tar.gz into the committed runs with bench/ablation/merge_bench.py (it checks
# that no measured record is lost or changed).
# Example (the evaluator's whole GPU verification, bench/gpu_suite.sh's header):
#   WALL_X=3 bash bench/device_bg.sh start verify -- bash bench/gpu_suite.sh execute smoke fast bench torch
set -uo pipefail
cd "$(dirname "$0")/.."
# (BGDIR, not ROOT: an exported ROOT, e.g. bench_suite.sh's, must reach the job unchanged)
BGDIR=${BG_ROOT:-/tmp/cudaperf_bg}
usage() { echo "usage: device_bg.sh start NAME -- COMMAND... | watch NAME | stop NAME" >&2; exit 2; }
[ $# -ge 2 ] || usage
op=$1 name=$2; shift 2
case "$name" in *[!A-Za-z0-9_.-]*|"") echo "device_bg: NAME $name: use letters, digits, . _ -" >&2; exit 2 ;; esac
J=$BGDIR/$name
running() { [ -f "$J/pid" ] && kill -0 "$(cat "$J/pid")" 2>/dev/null && [ ! -f "$J/rc" ]; }
bring() {  # the job's log and out/ into the call's $OUT (two files: a call brings back 8)
  local out=${OUT:-/tmp/out}
  mkdir -p "$out"
  cp "$J/log" "$out/bg_$name.log" 2>/dev/null
  [ -f "$J/rc" ] && cp "$J/rc" "$J/out/rc"
  tar -C "$J" -czf "$out/bg_$name.tar.gz.tmp" --warning=no-file-changed out 2>/dev/null
  mv -f "$out/bg_$name.tar.gz.tmp" "$out/bg_$name.tar.gz"
}
case "$op" in
start)
  [ "${1:-}" = "--" ] && shift
  [ $# -ge 1 ] || usage
  if running; then echo "device_bg: $name is running already (pid $(cat "$J/pid")): watch it" >&2; exit 3; fi
  rm -rf "$J"; mkdir -p "$J/out"
  # the job's shell writes its own pid (the session's leader: setsid may have forked) and its
  # exit status, so `watch` and `stop` find it whatever started it
  # BG_JOB tells the job it outlives this call: bench_suite.sh then keeps its runs outside
  # the tree that each device call copies anew
  # and the package it imports comes from a copy of src/ first on PYTHONPATH: a later call's
  # copy of the tree once removed a module a background run imported late (session 40)
  cp -r src "$J/src" 2>/dev/null && export PYTHONPATH=$J/src${PYTHONPATH:+:$PYTHONPATH}
  BG_JOB=$name OUT=$J/out setsid nohup bash -c \
    'echo $$ > "$3"; timeout "$1" "${@:4}"; echo $? > "$2.tmp"; mv "$2.tmp" "$2"' \
    _ "${BG_BUDGET_S:-1500}" "$J/rc" "$J/pid" "$@" > "$J/log" 2>&1 < /dev/null &
  for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$J/pid" ] && break; sleep 0.2; done
  sleep "${BG_START_CHECK_S:-3}"
  if [ -f "$J/rc" ] && [ "$(cat "$J/rc")" != 0 ]; then
    echo "device_bg: $name ended at once (rc $(cat "$J/rc")):" >&2; tail -20 "$J/log" >&2; bring; exit 4
  fi
  echo "device_bg: $name started (pid $(cat "$J/pid"), budget ${BG_BUDGET_S:-1500} s); follow it with: bash bench/device_bg.sh watch $name"
  ;;
watch)
  [ -d "$J" ] || { echo "device_bg: no job $name here (the machine went back?): start it again" >&2; exit 3; }
  t0=$SECONDS
  while running && [ $((SECONDS - t0)) -lt "${WATCH_S:-540}" ]; do
    bring; sleep "${BG_POLL_S:-10}"
  done
  bring
  tail -n "${BG_TAIL:-25}" "$J/log"
  if [ -f "$J/rc" ]; then
    echo "device_bg: $name ended, rc $(cat "$J/rc")"; exit "$(cat "$J/rc")"
  fi
  running || { echo "device_bg: $name is gone without an exit status (killed?)"; exit 5; }
  echo "device_bg: $name still running after $((SECONDS - t0)) s: watch again at once"
  ;;
stop)  # the whole process session of the job (timeout makes a process group of its own)
  if running; then
    pkill -TERM -s "$(cat "$J/pid")"; sleep 1; echo 143 > "$J/rc"
  fi
  bring; echo "device_bg: $name stopped"
  ;;
*) usage ;;
esac
