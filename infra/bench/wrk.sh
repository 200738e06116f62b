#!/usr/bin/env bash
# Helpers for the wrk benchmarks of the edge, sourced by prices.sh and resources.sh:
#   wrk_install              installs wrk (apt-get) when missing
#   wrk_serve PKG ARGS...    builds the bench server PKG, runs it with ARGS, waits for its
#                            "ready k=v ..." line and sets READY to that line (cleanup on EXIT)
#   ready_field NAME         prints the value of NAME=... from READY
#   wrk_measure URL          one wrk run; prints req/s; fails on socket errors or non-2xx
#   wrk_best URL_A URL_B     warms both up, alternates two rounds of each (a noisy neighbour
#                            hurts both alike) and sets BEST_A and BEST_B to the best req/s
# Tunables: WRK_DURATION per round (default 4s), WRK_THREADS (2), WRK_CONNECTIONS (50);
# the PRICES_BENCH_* names of earlier versions still work.
DURATION="${WRK_DURATION:-${PRICES_BENCH_DURATION:-4s}}"
THREADS="${WRK_THREADS:-${PRICES_BENCH_THREADS:-2}}"
CONNS="${WRK_CONNECTIONS:-${PRICES_BENCH_CONNECTIONS:-50}}"

wrk_install() {
  if command -v wrk >/dev/null 2>&1; then return; fi
  echo "bench: installing wrk (apt-get)" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if ! $sudo apt-get install -y wrk >/dev/null 2>&1; then
    $sudo apt-get update >/dev/null
    $sudo apt-get install -y wrk >/dev/null
  fi
}

wrk_tmp=$(mktemp -d)
wrk_pid=""
wrk_cleanup() {
  if [ -n "$wrk_pid" ]; then kill "$wrk_pid" 2>/dev/null || true; wait "$wrk_pid" 2>/dev/null || true; fi
  rm -rf "$wrk_tmp"
}
trap wrk_cleanup EXIT

wrk_serve() {
  local pkg=$1; shift
  go build -o "$wrk_tmp/server" "$pkg"
  mkfifo "$wrk_tmp/ready"
  "$wrk_tmp/server" "$@" >"$wrk_tmp/ready" 2>"$wrk_tmp/stderr" &
  wrk_pid=$!
  # The program prints its ready line once its listeners accept; read blocks until then.
  if ! read -r -t 60 READY <"$wrk_tmp/ready"; then
    cat "$wrk_tmp/stderr" >&2
    echo "bench: $pkg did not start" >&2
    exit 1
  fi
}

ready_field() {
  echo "$READY" | sed -n "s/.*$1=\([^ ]*\).*/\1/p"
}

wrk_measure() {
  local out
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "$1")
  if echo "$out" | grep -Eq 'Non-2xx|Socket errors'; then
    echo "$out" >&2
    echo "bench: errors against $1" >&2
    exit 1
  fi
  echo "$out" | awk '/^Requests\/sec:/ { print $2 }'
}

wrk_best() {
  local a b
  wrk -t1 -c4 -d1s "$1" >/dev/null
  wrk -t1 -c4 -d1s "$2" >/dev/null
  BEST_A=0 BEST_B=0
  for _ in 1 2; do
    b=$(wrk_measure "$2")
    a=$(wrk_measure "$1")
    BEST_A=$(awk -v x="$BEST_A" -v y="$a" 'BEGIN { print (y > x) ? y : x }')
    BEST_B=$(awk -v x="$BEST_B" -v y="$b" 'BEGIN { print (y > x) ? y : x }')
  done
}
