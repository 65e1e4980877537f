#!/usr/bin/env bash
# HTTP front-end benchmark: wrk over TLS keep-alive against GET /health, which exercises
# TLS, the framing filter, routing, JSON and the access log (default level, to a file)
# but no model.
# usage: tests/bench/http.sh BUILD/cachegate [seconds] [connections]
set -euo pipefail
BIN=${1:-build/cachegate}
SECS=${2:-10}
CONNS=${3:-64}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
printf '[server]\nmax_connections = 4096\n' >"$tmp/bench.conf"
"$BIN" serve --config "$tmp/bench.conf" --listen 127.0.0.1:0 --data-dir "$tmp/data" \
    --device cpu 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do
    grep -q '"listening"' "$tmp/log" 2>/dev/null && break
    sleep 0.1
done
port=$(grep -o '"port":"[0-9]*"' "$tmp/log" | grep -o '[0-9]*')
echo "cachegate GET /health: wrk -t2 -c$CONNS -d${SECS}s (TLS, keep-alive), $(nproc) cores"
wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "https://127.0.0.1:$port/health"
