#!/usr/bin/env bash
# HTTP front-end benchmark: wrk over TLS keep-alive, with the access log at its default level
# (to a file), against
#   GET /health: TLS, the framing filter, routing, JSON, no model;
#   POST /v1/chat/completions whose exact answer is cached: the above plus tenant admission,
#   the cache key, the exact lookup and the reply, but no engine.
# usage: tests/bench/http.sh BUILD/cachegate [seconds] [connections]
set -euo pipefail
BIN=${1:-build/cachegate}
SECS=${2:-10}
CONNS=${3:-64}
ADMIN=bench-admin-key
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
printf '[server]\nmax_connections = 4096\n[tenants]\nadmin_key = %s\n' "$ADMIN" >"$tmp/bench.conf"
"$BIN" serve --config "$tmp/bench.conf" --listen 127.0.0.1:0 --data-dir "$tmp/data" \
    --device cpu 2>"$tmp/log" &
pid=$!
for _ in $(seq 300); do
    grep -q '"listening"' "$tmp/log" 2>/dev/null && break
    sleep 0.1
done
port=$(grep -o '"port":[0-9]*' "$tmp/log" | grep -o '[0-9]*')
url="https://127.0.0.1:$port"
echo "cachegate GET /health: wrk -t2 -c$CONNS -d${SECS}s (TLS, keep-alive), $(nproc) cores"
wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "$url/health"

# one cached answer, then the same request over and over
model=smollm2-135m-instruct
msgs='[{"role":"system","content":"You are a helpful assistant."},'
msgs+='{"role":"user","content":"What is the capital of France?"}]'
answer='The capital of France is Paris, which is also its largest city.'
printf '{"model":"%s","messages":%s,"temperature":0,"answer":"%s"}\n' "$model" "$msgs" "$answer" \
    >"$tmp/import.jsonl"
curl -sS --fail -k -H "Authorization: Bearer $ADMIN" --data-binary @"$tmp/import.jsonl" \
    "$url/admin/cache/import" >/dev/null
body=$(printf '{"model":"%s","messages":%s,"max_tokens":64,"temperature":0}' "$model" "$msgs")
hdr=$(curl -sS --fail -k -D - -o /dev/null -H 'Content-Type: application/json' \
    -d "$body" "$url/v1/chat/completions")
grep -qi '^x-cache-kind: exact' <<<"$hdr" || { echo "not an exact hit:"; echo "$hdr"; exit 1; }
cat >"$tmp/chat.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '$body'
LUA
echo "cachegate POST /v1/chat/completions, exact hit: wrk -t2 -c$CONNS -d${SECS}s (TLS," \
    "keep-alive), $(nproc) cores"
wrk -t2 -c"$CONNS" -d"${SECS}s" --latency -s "$tmp/chat.lua" "$url/v1/chat/completions"
