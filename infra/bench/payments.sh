#!/usr/bin/env bash
# bench pay_by_transfer: p99 time from the production of the block holding a transfer to a
# payment address to the energy on the sender's account (the delegation in a block), against
# the block interval of the benchmark's chain (1 s). A ratio of 1 is the next block: with the
# wait for the transfer's own block, transfer to energy stays under two block intervals.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(go test -run '^$' -bench '^BenchmarkPayByTransfer$' -benchtime "${BENCHTIME:-3x}" -count 1 ./processors/payments 2>&1) || {
  echo "$out" >&2; echo "bench: BenchmarkPayByTransfer failed" >&2; exit 1; }
echo "$out" | grep -E '^BenchmarkPayByTransfer' >&2 || true
echo "$out" | awk '/^BenchmarkPayByTransfer/ { for (i = 2; i <= NF; i++) { if ($i == "p99_s") v = $(i-1); if ($i == "block_s") r = $(i-1) } }
  END { if (v == "" || r == "") { print "bench pay_by_transfer: no p99_s or block_s reported" > "/dev/stderr"; exit 1 }
        printf "bench pay_by_transfer: %.3f s, ratio %.2f vs block interval (%.1f s; from the transfer'"'"'s block to the energy, p99)\n", v, v / r, r }'
