#!/usr/bin/env bash
# Two orb-bench builds against each other on unpinned `tput 32 --quick` (a fresh server with 2
# threads per run, nothing pinned), in ABBA (or BAAB) rounds; prints the median of the
# per-round ratios B/A of calls/s and of the client's CPU per call (`perf stat -e
# task-clock`), which this VM's unpinned placement moves less than calls/s, and the median
# share of the machine's CPU time left idle during each run (`/proc/stat`): an ORB that
# leaves the CPUs idle is waiting on itself, not on them (PROFILE.md, 2026-12-07 22:40).
#
#   examples/bench/ab_tput.sh [--split] A_BIN B_BIN ROUNDS
#
# --split: split placement instead (the server on CPU 0, the client on CPU 1, as run.sh's
# `tput_split`), with each CPU's busy share printed apart: which side's CPU bounds the calls
# (PROFILE.md, 2026-12-08: the client's, busy 95-98% against the server's 41-50%).
#
# Needs perf and python3 (and taskset for --split).
set -uo pipefail
split=0
if [ "${1:-}" = --split ]; then split=1; shift; fi
A=$1; B=$2; R=$3; out=$(mktemp); stat=$(mktemp)
trap 'rm -f "$out" "$stat"' EXIT
# Total and idle (idle + iowait) jiffies of all CPUs, then of CPU 0 and of CPU 1.
cpu_ticks() {
  awk '/^cpu[01]? /{idle=$5+$6; t=0; for(i=2;i<=NF;i++) t+=$i; printf "%d %d ", t, idle} END {print ""}' /proc/stat
}
srv=(); cli=()
if [ "$split" = 1 ]; then srv=(taskset -c 0); cli=(taskset -c 1); fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
one() {
  local P S js tc
  P=$(free_port); "${srv[@]+"${srv[@]}"}" "$1" server --port "$P" --threads 2 > /dev/null 2>&1 & S=$!
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"$P") 2>/dev/null && break; sleep 0.05; done
  read -r t0 i0 a0 b0 c0 d0 < <(cpu_ticks)
  js=$("${cli[@]+"${cli[@]}"}" perf stat -x, -e task-clock -o "$stat" "$1" client --port "$P" tput 32 --quick 2>/dev/null)
  read -r t1 i1 a1 b1 c1 d1 < <(cpu_ticks)
  tc=$(awk -F, '/task-clock/ { print $1 }' "$stat")
  idle() { echo $(( ($2 - $1) * 1000 / ($4 - $3 > 0 ? $4 - $3 : 1) )); }
  echo "$r|$2|$tc|$(idle "$i0" "$i1" "$t0" "$t1")|$(idle "$b0" "$b1" "$a0" "$a1")|$(idle "$d0" "$d1" "$c0" "$c1")|$js" >> "$out"
  kill "$S"; wait "$S" 2>/dev/null
}
for r in $(seq "$R"); do
  if [ $((r % 2)) = 0 ]; then one "$A" a; one "$B" b; one "$B" b; one "$A" a
  else one "$B" b; one "$A" a; one "$A" a; one "$B" b; fi
done
python3 - "$out" "$split" << 'PY'
import json, sys, statistics as st
runs = {}
for line in open(sys.argv[1]):
    r, w, tc, idle, idle0, idle1, js = line.strip().split("|", 6)
    j = json.loads(js)
    runs.setdefault(r, {}).setdefault(w, []).append(
        (float(tc) * 1000 / j["calls"], j["rps"], int(idle) / 10, int(idle0) / 10, int(idle1) / 10))
for k, name in ((1, "calls/s"), (0, "client CPU µs per call")):
    ratios = [st.mean(x[k] for x in v["b"]) / st.mean(x[k] for x in v["a"]) for v in runs.values()]
    a = [x[k] for v in runs.values() for x in v["a"]]; b = [x[k] for v in runs.values() for x in v["b"]]
    q = st.quantiles(ratios, n=4)
    print(f"{name}: A median {st.median(a):.2f}, B median {st.median(b):.2f}; "
          f"B/A per round: median {st.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}), {len(ratios)} rounds")
idle = {w: st.median(x[2] for v in runs.values() for x in v[w]) for w in ("a", "b")}
print(f"CPU idle during the runs (median): A {idle['a']:.1f}%, B {idle['b']:.1f}%")
if sys.argv[2] == "1":
    for w in ("a", "b"):
        s0 = st.median(100 - x[3] for v in runs.values() for x in v[w])
        s1 = st.median(100 - x[4] for v in runs.values() for x in v[w])
        print(f"{w.upper()}: server's CPU 0 busy {s0:.1f}%, client's CPU 1 busy {s1:.1f}% (medians)")
PY
