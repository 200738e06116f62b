#!/usr/bin/env bash
# GET /v1/prices throughput with a stock load tool (wrk), as a ratio to a trivial fasthttp
# handler served by the same process on the same machine in the same run. Prints exactly one
# line on stdout:
#   bench prices_get: VALUE req/s, ratio R vs trivial fasthttp handler (REF req/s)
# Called from infra/bench/run.sh; runnable alone. Loopback only; bounded duration
# (WRK_DURATION per round, default 4s; two rounds per target, best kept; infra/bench/wrk.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
. infra/bench/wrk.sh

wrk_install
wrk_serve ./infra/bench/pricesbench
edge=$(ready_field edge)
ref=$(ready_field ref)
wrk_best "http://$edge/v1/prices" "http://$ref/"
awk -v v="$BEST_A" -v r="$BEST_B" \
  'BEGIN { printf "bench prices_get: %.0f req/s, ratio %.2f vs trivial fasthttp handler (%.0f req/s)\n", v, v / r, r }'
