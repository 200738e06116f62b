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

# metric PKG BENCH UNIT: run one Go benchmark and print the value it reported for UNIT.
metric() {
  local pkg=$1 bench=$2 unit=$3 out
  out=$(go test -run '^$' -bench "^${bench}\$" -benchtime "$BENCHTIME" -count 1 "$pkg" 2>&1) || {
    echo "$out" >&2; echo "bench: $bench in $pkg failed" >&2; exit 1; }
  echo "$out" | grep -E "^${bench}(-[0-9]+)?[[:space:]]" >&2 || true
  echo "$out" | awk -v u="$unit" '$0 ~ "^'"$bench"'" { for (i = 2; i <= NF; i++) if ($i == u) v = $(i-1) } END { if (v == "") exit 1; print v }'
}

# pair NAME UNIT PKG BENCH REFPKG REFBENCH REFNAME: the summary line for BENCH against REFBENCH.
pair() {
  local name=$1 unit=$2 v r
  v=$(metric "$3" "$4" "$unit") || { echo "bench $name: no $unit reported" >&2; exit 1; }
  r=$(metric "$5" "$6" "$unit") || { echo "bench $name: reference reported no $unit" >&2; exit 1; }
  awk -v n="$name" -v v="$v" -v r="$r" -v u="$unit" -v ref="$7" \
    'BEGIN { printf "bench %s: %.0f %s, ratio %.2f vs %s (%.0f %s)\n", n, v, u, v / r, ref, r, u }'
}

# Chain follower catch-up from an old cursor, against the simulator's raw block-range
# serving rate (the ceiling: fetching the same blocks with no processing).
pair chainwatch_catchup blocks/s ./chainwatch BenchmarkCatchUp ./infra/tronsim BenchmarkCatchUp "simulator block fetch"

# Outbox relay publish rate, against producing the same records straight to the broker.
pair outbox_relay events/s ./infra/outbox BenchmarkRelay ./infra/outbox BenchmarkDirectProduce "direct produce to kfake"

# Signed-request verification on the edge (HMAC, replay cache, key lookup, rate limits),
# against a public GET through the same edge and middleware.
pair edge_signed_request req/s ./edge BenchmarkSignedRequest ./edge BenchmarkPublicRequest "public GET on the same edge"
# The same signed requests while a flood of made-up key ids hits the edge: a real key's
# rate holds (unknown ids are answered from a bounded negative cache, docs/auth.md).
pair edge_signed_under_key_flood req/s ./edge BenchmarkSignedRequestUnderFlood ./edge BenchmarkSignedRequest "signed requests without the flood"

# The same signed GET made with the integrators' Go client (infra/client), against a bare
# signed fasthttp request on the same edge: the client's own cost.
pair client_signed_request req/s ./edge BenchmarkSignedRequestClient ./edge BenchmarkSignedRequest "bare signed fasthttp request on the same edge"

# GET /v1/prices served from the in-memory snapshot, measured with wrk against a trivial
# fasthttp handler in the same process (target ratio >= 0.5).
bash infra/bench/prices.sh
# GET /v1/resources/{address} served from its cache, against GET /v1/prices on the same edge.
bash infra/bench/resources.sh
bash infra/bench/orders.sh # signed POST /v1/orders, whole pipeline running, vs pgbench TPC-B on the same database
bash infra/bench/orders.sh delivery # orders reaching a broadcast delegation (3 s blocks), vs pgbench TPC-B

# Webhook deliveries drained by the deliverer (Kafka in, signed POST out, history written),
# against plain signed POSTs to the same kind of receiver. The same benchmark also reports
# p50/p99 commit-to-first-attempt delay at a steady 100 events/s (outbox and relay included).
pair webhook_delivery deliveries/s ./consumers/webhookdelivery BenchmarkWebhookDelivery ./consumers/webhookdelivery BenchmarkPlainPost "plain HTTP POSTs to the same receiver"
