#!/usr/bin/env bash
# Interleaved before/after comparison of several orb-bench builds, so that a drift in the
# machine's load hits every build alike: each round runs lat (server and client on CPU 0),
# tput 32 (unpinned) and nest 1000 (CPU 0) with each build in turn, then prints medians.
#
#   examples/bench/interleave.sh ROUNDS NAME=BIN [NAME=BIN ...]
#   e.g. interleave.sh 5 before=/tmp/a/perf/orb-bench after=target/perf/orb-bench
#
# Build each with `cargo build --profile perf -p orb-bench` in its own worktree and
# CARGO_TARGET_DIR. Needs taskset and python3.
set -euo pipefail
rounds="$1"; shift
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
serve() { # bin pin(cpu|none): sets SRV and PORT
    PORT="$(free_port)"
    if [ "$2" = none ]; then "$1" server --port "$PORT" --threads 2 > /dev/null 2>&1 &
    else taskset -c "$2" "$1" server --port "$PORT" --threads 2 > /dev/null 2>&1 & fi
    SRV=$!
    for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2> /dev/null && return; sleep 0.05; done
    echo "server $1 did not start" >&2; exit 1
}
stop() { kill "$SRV"; wait "$SRV" 2> /dev/null || true; }
for _ in $(seq "$rounds"); do
    for nb in "$@"; do
        name="${nb%%=*}"; bin="${nb#*=}"
        serve "$bin" 0; echo "$name $(taskset -c 0 "$bin" client --port "$PORT" lat 2> /dev/null)" >> "$out"; stop
        serve "$bin" none; echo "$name $("$bin" client --port "$PORT" tput 32 2> /dev/null)" >> "$out"; stop
        echo "$name $(taskset -c 0 "$bin" nest --depth 1000 --threads 1 2> /dev/null)" >> "$out"
    done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, js = line.split(" ", 1)
    d = json.loads(js)
    w = d["workload"]
    for key, v in {"lat": [("lat p50 us", "p50_us"), ("lat p99 us", "p99_us")],
                   "tput": [("tput rps", "rps")], "nest": [("nest us/level", "us_per_level")]}[w]:
        rows.setdefault(key, {}).setdefault(name, []).append(d[v])
for key, by in rows.items():
    print(key.ljust(14), "  ".join(f"{n}: {statistics.median(v):.2f} ({min(v):.1f}-{max(v):.1f})" for n, v in by.items()))
PY
