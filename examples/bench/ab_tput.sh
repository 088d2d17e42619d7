#!/usr/bin/env bash
# Two orb-bench builds against each other on unpinned `tput 32 --quick` (a fresh server with 2
# threads per run, nothing pinned), in ABBA (or BAAB) rounds; prints the median of the
# per-round ratios B/A of calls/s and of the client's CPU per call (`perf stat -e
# task-clock`), which this VM's unpinned placement moves less than calls/s, and the median
# share of the machine's CPU time left idle during each run (`/proc/stat`): an ORB that
# leaves the CPUs idle is waiting on itself, not on them (PROFILE.md, 2026-12-07 22:40).
#
#   examples/bench/ab_tput.sh A_BIN B_BIN ROUNDS
#
# Needs perf and python3.
set -uo pipefail
A=$1; B=$2; R=$3; out=$(mktemp); stat=$(mktemp)
trap 'rm -f "$out" "$stat"' EXIT
# Total and idle (idle + iowait) jiffies of all CPUs.
cpu_ticks() { awk '/^cpu /{idle=$5+$6; t=0; for(i=2;i<=NF;i++) t+=$i; print t, idle}' /proc/stat; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
one() {
  local P S js tc
  P=$(free_port); "$1" server --port "$P" --threads 2 > /dev/null 2>&1 & S=$!
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"$P") 2>/dev/null && break; sleep 0.05; done
  read -r t0 i0 < <(cpu_ticks)
  js=$(perf stat -x, -e task-clock -o "$stat" "$1" client --port "$P" tput 32 --quick 2>/dev/null)
  read -r t1 i1 < <(cpu_ticks)
  tc=$(awk -F, '/task-clock/ { print $1 }' "$stat")
  echo "$r|$2|$tc|$(( (i1 - i0) * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1) ))|$js" >> "$out"
  kill "$S"; wait "$S" 2>/dev/null
}
for r in $(seq "$R"); do
  if [ $((r % 2)) = 0 ]; then one "$A" a; one "$B" b; one "$B" b; one "$A" a
  else one "$B" b; one "$A" a; one "$A" a; one "$B" b; fi
done
python3 - "$out" << 'PY'
import json, sys, statistics as st
runs = {}
for line in open(sys.argv[1]):
    r, w, tc, idle, js = line.strip().split("|", 4)
    j = json.loads(js)
    runs.setdefault(r, {}).setdefault(w, []).append(
        (float(tc) * 1000 / j["calls"], j["rps"], int(idle) / 10))
for k, name in ((1, "calls/s"), (0, "client CPU µs per call")):
    ratios = [st.mean(x[k] for x in v["b"]) / st.mean(x[k] for x in v["a"]) for v in runs.values()]
    a = [x[k] for v in runs.values() for x in v["a"]]; b = [x[k] for v in runs.values() for x in v["b"]]
    q = st.quantiles(ratios, n=4)
    print(f"{name}: A median {st.median(a):.2f}, B median {st.median(b):.2f}; "
          f"B/A per round: median {st.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}), {len(ratios)} rounds")
idle = {w: st.median(x[2] for v in runs.values() for x in v[w]) for w in ("a", "b")}
print(f"CPU idle during the runs (median): A {idle['a']:.1f}%, B {idle['b']:.1f}%")
PY
