#!/usr/bin/env bash
# tput-async 1000 of two orb-bench builds and tonic, interleaved round by round (one server
# per run, nothing pinned, as run.sh runs tput-async); prints each one's median calls/s,
# p50 and p99, and A's and B's per-round ratio to tonic.
#
#   examples/bench/ab_tput_async.sh A_BIN B_BIN ROUNDS      # tonic runs from B_BIN
#
# Needs python3.
set -uo pipefail
A=$1; B=$2; R=$3; out=$(mktemp)
trap 'rm -f "$out"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
run() {
  local P S
  P=$(free_port); "$1" server --port "$P" --threads 2 --impl "$2" >/dev/null 2>&1 & S=$!
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"$P") 2>/dev/null && break; sleep 0.05; done
  echo "$r|$3|$("$1" client --port "$P" --impl "$2" tput-async 1000 2>/dev/null)" >> "$out"
  kill "$S"; wait "$S" 2>/dev/null
}
for r in $(seq "$R"); do run "$A" orb a; run "$B" orb b; run "$B" tonic tonic; done
python3 - "$out" <<'PY'
import json, sys, statistics as st
d = {}
for line in open(sys.argv[1]):
    r, v, js = line.strip().split("|", 2)
    j = json.loads(js); d.setdefault(r, {})[v] = (j["rps"], j["p50_us"], j["p99_us"])
for v in ["a", "b", "tonic"]:
    xs = [d[r][v] for r in d]
    print(f"{v}: calls/s median {st.median(x[0] for x in xs):.0f} (runs: {', '.join(f'{x[0]:.0f}' for x in xs)}), "
          f"p50 median {st.median(x[1] for x in xs)/1000:.1f} ms, p99 median {st.median(x[2] for x in xs)/1000:.1f} ms")
for v in ["a", "b"]:
    rs = sorted(d[r][v][0] / d[r]["tonic"][0] for r in d)
    print(f"{v} / tonic per round: median {st.median(rs):.2f} ({', '.join(f'{x:.2f}' for x in rs)})")
PY
