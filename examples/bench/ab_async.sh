#!/usr/bin/env bash
# lat vs lat-async (issue 19's target: lat-async p50 <= 1.1 x lat p50), in short runs that a
# VM whose speed switches between levels cannot split: each round starts a server and runs
# `lat` and `lat-async` (`--quick`, 2,200 calls) in ABBA order, server and client on CPU 0;
# it prints the median of the per-round ratios (mean lat-async p50 / mean lat p50).
#
#   examples/bench/ab_async.sh BIN ROUNDS
#   e.g. examples/bench/ab_async.sh target/perf/orb-bench 41
#
# Needs taskset and python3. interleave_async.sh runs the long variant, with the driver modes.
set -uo pipefail
B=$1; R=$2; out=$(mktemp)
trap 'rm -f "$out"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for r in $(seq "$R"); do
  P=$(free_port); taskset -c 0 "$B" server --port "$P" --threads 2 >/dev/null 2>&1 & S=$!
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"$P") 2>/dev/null && break; sleep 0.05; done
  if [ $((r % 2)) = 0 ]; then order="lat lat-async lat-async lat"; else order="lat-async lat lat lat-async"; fi
  for wl in $order; do echo "$r|$wl|$(taskset -c 0 "$B" client --port "$P" "$wl" --quick 2>/dev/null)" >> "$out"; done
  kill $S; wait $S 2>/dev/null
done
python3 - "$out" <<'PY'
import json, sys, statistics as st
runs = {}
for line in open(sys.argv[1]):
    r, wl, js = line.strip().split("|", 2)
    runs.setdefault(r, {}).setdefault(wl, []).append(json.loads(js)["p50_us"])
ratios = [st.mean(v["lat-async"]) / st.mean(v["lat"]) for v in runs.values()]
lat = [x for v in runs.values() for x in v["lat"]]
la = [x for v in runs.values() for x in v["lat-async"]]
print(f"lat p50 median {st.median(lat):.2f} us, lat-async p50 median {st.median(la):.2f} us")
q = st.quantiles(ratios, n=4)
print(f"lat-async / lat per round: median {st.median(ratios):.3f} "
      f"(quartiles {q[0]:.3f}-{q[2]:.3f}), {len(ratios)} rounds")
PY
