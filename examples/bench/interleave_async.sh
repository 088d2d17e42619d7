#!/usr/bin/env bash
# Interleaved lat vs lat-async (issue 19's target: lat-async p50 <= 1.1 x lat p50) with one
# orb-bench build: each round runs lat, lat-async (drive_with), lat-async --driver-task and
# lat-async --no-driver against a fresh server, server and client on CPU 0, then prints the
# medians and the per-round ratios to lat.
#
#   examples/bench/interleave_async.sh BIN ROUNDS [OUT]
#   e.g. interleave_async.sh target/perf/orb-bench 9
#
# Needs taskset and python3.
set -uo pipefail
B=$1; R=$2; out=${3:-$(mktemp)}
: > $out
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for r in $(seq $R); do
  for wl in "lat" "lat-async" "lat-async --driver-task" "lat-async --no-driver"; do
    P=$(free_port); taskset -c 0 $B server --port $P --threads 2 >/dev/null 2>&1 & S=$!
    for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.05; done
    echo "$r|$wl|$(taskset -c 0 $B client --port $P $wl 2>/dev/null)" >> $out
    kill $S; wait $S 2>/dev/null
  done
done
python3 - $out <<'PY'
import json,sys,statistics as st
rows={}; runs={}
for line in open(sys.argv[1]):
    r,wl,js=line.strip().split("|",2); d=json.loads(js)
    rows.setdefault(wl,[]).append(d["p50_us"]); runs.setdefault(r,{})[wl]=d["p50_us"]
for k,v in rows.items(): print(f"{k:26s} p50 median {st.median(v):7.2f} us  runs {v}")
for k in rows:
    if k=="lat": continue
    rat=[x[k]/x["lat"] for x in runs.values() if "lat" in x and k in x]
    print(f"ratio {k:26s}/ lat per run {[round(x,2) for x in rat]} median {st.median(rat):.3f}")
PY
