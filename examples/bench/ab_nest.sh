#!/usr/bin/env bash
# Two orb-bench builds against each other on `nest --depth 1000 --threads 1` (both processes
# on CPU 0), in ABBA (or BAAB) rounds that a VM whose speed switches between levels cannot
# split; prints the median of the per-round ratios B/A of `us_per_level`.
#
#   examples/bench/ab_nest.sh A_BIN B_BIN ROUNDS [EXTRA NEST ARGS, e.g. --bidir]
#
# Needs taskset and python3.
set -uo pipefail
A=$1; B=$2; R=$3; shift 3; out=$(mktemp)
trap 'rm -f "$out"' EXIT
one() {
  local bin=$1 side=$2
  shift 2
  echo "$r|$side|$(taskset -c 0 "$bin" nest --depth 1000 --threads 1 "$@" 2>/dev/null)" >> "$out"
}
for r in $(seq "$R"); do
  if [ $((r % 2)) = 0 ]; then one "$A" a "$@"; one "$B" b "$@"; one "$B" b "$@"; one "$A" a "$@"
  else one "$B" b "$@"; one "$A" a "$@"; one "$A" a "$@"; one "$B" b "$@"; fi
done
python3 - "$out" << 'PY'
import json, sys, statistics as st
runs = {}
for line in open(sys.argv[1]):
    r, w, js = line.strip().split("|", 2)
    runs.setdefault(r, {}).setdefault(w, []).append(json.loads(js)["us_per_level"])
ratios = [st.mean(v["b"]) / st.mean(v["a"]) for v in runs.values()]
a = [x for v in runs.values() for x in v["a"]]; b = [x for v in runs.values() for x in v["b"]]
q = st.quantiles(ratios, n=4)
print(f"nest us/level: A median {st.median(a):.2f}, B median {st.median(b):.2f}; "
      f"B/A per round: median {st.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}), {len(ratios)} rounds")
PY
