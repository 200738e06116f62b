#!/usr/bin/env bash
# Screenshots every Grafana dashboard of this directory without Grafana: a real Prometheus
# (Debian's prometheus package) scrapes a running dev stack for WARMUP seconds, then
# render.html draws each dashboard's panels on its grid from that Prometheus's
# query_range answers, and headless chromium screenshots it: one PNG per dashboard in
# OUT_DIR (default screenshots/, ignored by git).
#
#   make run                      # or a dev stack with METRICS_ADDR elsewhere
#   infra/deploy/monitoring/screenshots.sh 127.0.0.1:9100
#
# Settings (environment): PROM_ADDR (127.0.0.1:19090, where this Prometheus listens),
# WARMUP (90, seconds of scraping before the screenshots), RANGE_MIN (15, minutes shown).
# Needs prometheus, chromium and jq (apt-get install -y prometheus chromium jq).
set -euo pipefail
target=${1:?usage: $0 METRICS_HOST:PORT [OUT_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$here/../../../screenshots}
prom_addr=${PROM_ADDR:-127.0.0.1:19090}
mkdir -p "$out"
tmp=$(mktemp -d)
cat >"$tmp/prometheus.yml" <<EOF
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: [$here/rules.yaml]
scrape_configs:
- job_name: rental
  static_configs: [{targets: ['$target']}]
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="$prom_addr" >"$tmp/prometheus.log" 2>&1 &
prom=$!
trap 'kill $prom 2>/dev/null; wait $prom 2>/dev/null; rm -rf "$tmp"' EXIT
sleep "${WARMUP:-90}"

range_s=$(( ${RANGE_MIN:-15} * 60 ))
for f in "$here"/dashboards/*.json; do
  name=$(basename "$f" .json)
  # render.html beside dashboard.js: the dashboard, this Prometheus and the range.
  mkdir -p "$tmp/$name" && cp "$here/render.html" "$tmp/$name/index.html"
  { printf 'const DASH = '; cat "$f"; printf ';\nconst PROM = "http://%s";\nconst RANGE = %d;\n' "$prom_addr" "$range_s"; } >"$tmp/$name/dashboard.js"
  rows=$(jq '[.panels[].gridPos | .y + .h] | max' "$f")
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --allow-file-access-from-files \
    --virtual-time-budget=20000 --window-size=1200,$((rows * 28 + 60)) \
    --screenshot="$out/monitoring-$name.png" "file://$tmp/$name/index.html" >/dev/null 2>&1
  echo "$out/monitoring-$name.png: dashboards/$name.json"
done
