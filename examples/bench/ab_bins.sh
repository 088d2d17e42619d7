#!/usr/bin/env bash
# Two orb-bench builds (or omniORB's omniorb-bench) against each other on one workload, in
# short runs that a VM whose speed switches between levels cannot split: each round starts
# a server per run and runs A and B in ABBA (or BAAB) order, server and client on CPU 0; it
# prints the median of the per-round ratios B/A of p50.
#
#   examples/bench/ab_bins.sh A_BIN B_BIN ROUNDS [WORKLOAD]     # WORKLOAD default lat
#   Q= examples/bench/ab_bins.sh ...                            # full runs (default --quick)
#   M=mean_us examples/bench/ab_bins.sh ...                     # another metric (default p50_us)
#
# Needs taskset and python3.
set -uo pipefail
A=$1; B=$2; R=$3; W=${4:-lat}; Q=${Q---quick}; M=${M:-p50_us}; out=$(mktemp)
trap 'rm -f "$out"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
one() {
  local P S
  P=$(free_port); taskset -c 0 "$1" server --port "$P" --threads 2 >/dev/null 2>&1 & S=$!
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"$P") 2>/dev/null && break; sleep 0.05; done
  # shellcheck disable=SC2086
  echo "$r|$2|$(taskset -c 0 "$1" client --port "$P" $W $Q 2>/dev/null)" >> "$out"
  kill "$S"; wait "$S" 2>/dev/null
}
for r in $(seq "$R"); do
  if [ $((r % 2)) = 0 ]; then one "$A" a; one "$B" b; one "$B" b; one "$A" a
  else one "$B" b; one "$A" a; one "$A" a; one "$B" b; fi
done
python3 - "$out" "$M" <<'PY'
import json, sys, statistics as st
runs, m = {}, sys.argv[2]
for line in open(sys.argv[1]):
    r, w, js = line.strip().split("|", 2)
    runs.setdefault(r, {}).setdefault(w, []).append(json.loads(js)[m])
ratios = [st.mean(v["b"]) / st.mean(v["a"]) for v in runs.values()]
a = [x for v in runs.values() for x in v["a"]]; b = [x for v in runs.values() for x in v["b"]]
q = st.quantiles(ratios, n=4)
print(f"{m}: A median {st.median(a):.2f}, B median {st.median(b):.2f}; "
      f"B/A per round: median {st.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}), {len(ratios)} rounds")
PY
