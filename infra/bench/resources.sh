#!/usr/bin/env bash
# GET /v1/resources/{address} served from the resources cache (infra/chainread: in memory,
# then Redis, then the node simulator), as a ratio to GET /v1/prices on the same edge in the
# same run. Prints exactly one line on stdout:
#   bench resources_get: VALUE req/s, ratio R vs GET /v1/prices on the same edge (REF req/s)
# Needs REDIS_URL (the shared cache). Called from infra/bench/run.sh; runnable alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
. infra/bench/wrk.sh
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"

wrk_install
wrk_serve ./infra/bench/pricesbench -resources
edge=$(ready_field edge)
addr=$(ready_field address)
wrk_best "http://$edge/v1/resources/$addr" "http://$edge/v1/prices"
awk -v v="$BEST_A" -v r="$BEST_B" \
  'BEGIN { printf "bench resources_get: %.0f req/s, ratio %.2f vs GET /v1/prices on the same edge (%.0f req/s)\n", v, v / r, r }'
