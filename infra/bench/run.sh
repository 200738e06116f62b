#!/usr/bin/env bash
# make bench: runs each benchmark next to a reference measured in the same command on the
# same machine, and ends each with one line
#   bench NAME: VALUE UNIT, ratio R vs REFERENCE
# so figures compare across commits although machines are noisy.
set -euo pipefail
cd "$(dirname "$0")/../.."
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
BENCHTIME="${BENCHTIME:-3x}"

# bench_out PKG BENCH: run one Go benchmark (BENCHTIME) and print its result line.
bench_out() {
  local pkg=$1 bench=$2 out
  out=$(go test -run '^$' -bench "^${bench}\$" -benchtime "$BENCHTIME" -count 1 "$pkg" 2>&1) || {
    echo "$out" >&2; echo "bench: $bench in $pkg failed" >&2; exit 1; }
  out=$(echo "$out" | grep -E "^${bench}(-[0-9]+)?[[:space:]]") || {
    echo "bench: $bench in $pkg printed no result line" >&2; exit 1; }
  echo "$out" >&2
  echo "$out"
}

# field LINE UNIT: the value a result line reported for UNIT.
field() {
  echo "$1" | awk -v u="$2" '{ for (i = 2; i <= NF; i++) if ($i == u) v = $(i-1) } END { if (v == "") exit 1; print v }'
}

# metric PKG BENCH UNIT: run one Go benchmark and print the value it reported for UNIT.
metric() {
  local line
  line=$(bench_out "$1" "$2") || exit 1
  field "$line" "$3"
}

# pair NAME UNIT PKG BENCH REFPKG REFBENCH REFNAME: the summary line for BENCH against REFBENCH.
pair() {
  local name=$1 unit=$2 v r
  v=$(metric "$3" "$4" "$unit") || { echo "bench $name: no $unit reported" >&2; exit 1; }
  r=$(metric "$5" "$6" "$unit") || { echo "bench $name: reference reported no $unit" >&2; exit 1; }
  awk -v n="$name" -v v="$v" -v r="$r" -v u="$unit" -v ref="$7" \
    'BEGIN { printf "bench %s: %.0f %s, ratio %.2f vs %s (%.0f %s)\n", n, v, u, v / r, ref, r, u }'
}

# Every benchmark runs even when one before it failed (a delivery run in which no hold
# held prints its line marked NOT HELD and fails); the command fails at the end, naming them.
failed=()
run() { local name=$1; shift; ( "$@" ) || failed+=("$name"); }

# Chain follower catch-up from an old cursor, against the simulator's raw block-range
# serving rate (the ceiling: fetching the same blocks with no processing).
run chainwatch_catchup pair chainwatch_catchup blocks/s ./chainwatch BenchmarkCatchUp ./infra/tronsim BenchmarkCatchUp "simulator block fetch"

# Outbox relay publish rate, against producing the same records straight to the broker.
run outbox_relay pair outbox_relay events/s ./infra/outbox BenchmarkRelay ./infra/outbox BenchmarkDirectProduce "direct produce to kfake"

# steady NAME PKG BENCH REFPKG REFBENCH REFNAME: the summary line of two steady-state
# benchmarks (edge/bench_test.go: EDGE_BENCH_CONCURRENCY keep-alive connections in a closed
# loop for EDGE_BENCH_DURATION, default 50 and 5s), each run once (-benchtime 1x), with
# req/s and p99 of both.
steady() {
  local name=$1 a b v vp r rp
  a=$(BENCHTIME=1x bench_out "$2" "$3") || exit 1
  b=$(BENCHTIME=1x bench_out "$4" "$5") || exit 1
  v=$(field "$a" req/s) && vp=$(field "$a" p99-ms) || { echo "bench $name: no req/s and p99 reported" >&2; exit 1; }
  r=$(field "$b" req/s) && rp=$(field "$b" p99-ms) || { echo "bench $name: reference reported no req/s and p99" >&2; exit 1; }
  awk -v n="$name" -v v="$v" -v vp="$vp" -v r="$r" -v rp="$rp" -v ref="$6" \
    'BEGIN { printf "bench %s: %.0f req/s, p99 %.2f ms, ratio %.2f vs %s (%.0f req/s, p99 %.2f ms)\n", n, v, vp, v / r, ref, r, rp }'
}

# Signed-request verification on the edge (HMAC, replay cache, key lookup, rate limits),
# every request freshly signed, against a public GET through the same edge and middleware.
run edge_signed_request steady edge_signed_request ./edge BenchmarkSignedRequest ./edge BenchmarkPublicRequest "public GET on the same edge"
# The same signed requests while a flood of made-up key ids hits the edge: a real key's
# rate holds (unknown ids are answered from a bounded negative cache, docs/auth.md).
run edge_signed_under_key_flood steady edge_signed_under_key_flood ./edge BenchmarkSignedRequestUnderFlood ./edge BenchmarkSignedRequest "signed requests without the flood"

# The same signed GET made with the integrators' Go client (infra/client), against a bare
# signed fasthttp request on the same edge: the client's own cost.
run client_signed_request steady client_signed_request ./edge BenchmarkSignedRequestClient ./edge BenchmarkSignedRequest "bare signed fasthttp request on the same edge"

# GET /v1/prices served from the in-memory snapshot, measured with wrk against a trivial
# fasthttp handler in the same process (target ratio >= 0.5).
run prices_get bash infra/bench/prices.sh
# GET /v1/resources/{address} served from its cache, against GET /v1/prices on the same edge.
run resources_get bash infra/bench/resources.sh
run orders_create bash infra/bench/orders.sh # signed POST /v1/orders, whole pipeline running, vs pgbench TPC-B on the same database
run orders_delivered bash infra/bench/orders.sh delivery # orders reaching a broadcast delegation (3 s blocks), vs pgbench TPC-B

# POST /v1/transactions to the customer's transaction in a block (3 s blocks, the whole
# processor), p99 against the block interval (target: under 2 block intervals).
tx_relay() {
  local out
  out=$(go test -run '^$' -bench '^BenchmarkTxRelay$' -benchtime 1x -count 1 ./processors/orderflow/ 2>&1) || {
    echo "$out" >&2; echo "bench: BenchmarkTxRelay failed" >&2; exit 1; }
  echo "$out" | grep -E '^BenchmarkTxRelay' >&2 || true
  echo "$out" | awk '/^BenchmarkTxRelay/ { for (i = 2; i <= NF; i++) { if ($i == "p99-ms") p99 = $(i-1); if ($i == "p50-ms") p50 = $(i-1); if ($i == "block-ms") blk = $(i-1) } }
    END { if (blk == "") exit 1; printf "bench tx_relay: %.0f ms p99 POST to block (p50 %.0f ms), ratio %.2f vs the block interval (%.0f ms)\n", p99, p50, p99 / blk, blk }'
}
run tx_relay tx_relay
run pay_by_transfer bash infra/bench/payments.sh # pay by transfer: the transfer's block to the energy, vs the block interval

# Webhook deliveries drained by the deliverer (Kafka in, signed POST out, history written),
# against plain signed POSTs to the same kind of receiver. The same benchmark also reports
# p50/p99 commit-to-first-attempt delay at a steady 100 events/s (outbox and relay included).
run webhook_delivery pair webhook_delivery deliveries/s ./consumers/webhookdelivery BenchmarkWebhookDelivery ./consumers/webhookdelivery BenchmarkPlainPost "plain HTTP POSTs to the same receiver"

if [ ${#failed[@]} -gt 0 ]; then
  echo "bench: failed: ${failed[*]}" >&2
  exit 1
fi
