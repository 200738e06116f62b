#!/usr/bin/env bash
# With the argument "delivery" (ORDERS_BENCH_MODE=delivery) it measures delivery instead:
# sustained delivery capacity and per-order accept→broadcast and accept→confirmed at half of
# it, simulated blocks every 3 s, one line
#   bench orders_delivered: V orders/s, ratio R vs pgbench TPC-B (T tps); accept→broadcast p50 A ms, p99 B ms; accept→confirmed p99 C ms at half capacity; block interval I ms
# (targets: ratio >= 0.25; broadcast p99 < one block interval; confirmed p99 within the
# confirmation depth plus two intervals). See infra/bench/ordersbench/delivery.go.
#
# Signed POST /v1/orders across many accounts with the whole pipeline running in one process
# (broker, simulator, relay, chainwatch, pricer, order processor, edge), next to pgbench
# TPC-B on the same fresh database in the same run (infra/bench/ordersbench). Prints exactly
# one line on stdout:
#   bench orders_create: V orders/s, ratio R vs pgbench TPC-B (T tps); p50 X ms, p99 Y ms, p99 at half rate Z ms, ratio Q vs pgbench TPC-B p99 at half its rate (P ms)
# Target: ratio >= 1.0 and p99 at half rate < 25 ms; P is the machine's own p99 for the
# reference workload at half its rate, to read Z against. Called from infra/bench/run.sh; runnable
# alone. Loopback only; bounded (ORDERS_BENCH_DURATION per phase, default 10s; see the
# program's doc comment for the other settings).
set -euo pipefail
cd "$(dirname "$0")/../.."
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"

if ! command -v "${PGBENCH:-pgbench}" >/dev/null 2>&1; then
  # Debian ships pgbench with the server package (postgresql-NN), which postgresql-contrib
  # pulls in; /usr/bin/pgbench is postgresql-client-common's wrapper.
  echo "orders bench: installing pgbench (apt-get install postgresql-contrib)" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if ! $sudo apt-get install -y postgresql-contrib >/dev/null 2>&1; then
    $sudo apt-get update >/dev/null
    $sudo apt-get install -y postgresql-contrib >/dev/null
  fi
fi

if [ "${1:-}" = "delivery" ]; then export ORDERS_BENCH_MODE=delivery; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ordersbench" ./infra/bench/ordersbench
# The program stops everything it started and drops its database by itself; the timeout
# only guards against a hang (SIGTERM first, which it handles, then SIGKILL).
timeout -k 30s 30m "$tmp/ordersbench"
