#!/usr/bin/env bash
# GET /v1/prices throughput with a stock load tool (wrk), as a ratio to a trivial fasthttp
# handler served by the same process on the same machine in the same run. Prints exactly one
# line on stdout:
#   bench prices_get: VALUE req/s, ratio R vs trivial fasthttp handler (REF req/s)
# Called from infra/bench/run.sh; runnable alone. Loopback only; bounded duration
# (PRICES_BENCH_DURATION per round, default 4s; two rounds per target, best kept).
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${PRICES_BENCH_DURATION:-4s}"
THREADS="${PRICES_BENCH_THREADS:-2}"
CONNS="${PRICES_BENCH_CONNECTIONS:-50}"

if ! command -v wrk >/dev/null 2>&1; then
  echo "prices bench: installing wrk (apt-get)" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if ! $sudo apt-get install -y wrk >/dev/null 2>&1; then
    $sudo apt-get update >/dev/null
    $sudo apt-get install -y wrk >/dev/null
  fi
fi

tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/pricesbench" ./infra/bench/pricesbench
mkfifo "$tmp/ready"
"$tmp/pricesbench" >"$tmp/ready" 2>"$tmp/stderr" &
pid=$!
# The program prints its ready line once both listeners accept; read blocks until then.
if ! read -r -t 60 line <"$tmp/ready"; then
  cat "$tmp/stderr" >&2
  echo "prices bench: server did not start" >&2
  exit 1
fi
edge=$(echo "$line" | sed -n 's/.*edge=\([^ ]*\).*/\1/p')
ref=$(echo "$line" | sed -n 's/.*ref=\([^ ]*\).*/\1/p')

# measure URL: one wrk run; prints req/s, fails on any socket error or non-2xx answer.
measure() {
  local out
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "$1")
  if echo "$out" | grep -Eq 'Non-2xx|Socket errors'; then
    echo "$out" >&2
    echo "prices bench: errors against $1" >&2
    exit 1
  fi
  echo "$out" | awk '/^Requests\/sec:/ { print $2 }'
}

# Warm both up, then alternate so that a noisy neighbour hurts both alike; keep the best.
wrk -t1 -c4 -d1s "http://$edge/v1/prices" >/dev/null
wrk -t1 -c4 -d1s "http://$ref/" >/dev/null
best_v=0 best_r=0
for _ in 1 2; do
  r=$(measure "http://$ref/")
  v=$(measure "http://$edge/v1/prices")
  best_r=$(awk -v a="$best_r" -v b="$r" 'BEGIN { print (b > a) ? b : a }')
  best_v=$(awk -v a="$best_v" -v b="$v" 'BEGIN { print (b > a) ? b : a }')
done
awk -v v="$best_v" -v r="$best_r" \
  'BEGIN { printf "bench prices_get: %.0f req/s, ratio %.2f vs trivial fasthttp handler (%.0f req/s)\n", v, v / r, r }'
