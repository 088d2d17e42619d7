#!/usr/bin/env bash
# Instructions and atomic read-modify-writes per `lat` call, server and client, counted by
# callgrind: numbers that do not move with the machine's load, unlike wall-clock time.
#
#   examples/bench/callgrind.sh            # both sides: instructions and atomics per call
#   examples/bench/callgrind.sh --where    # also: where the atomics are (source lines)
#   examples/bench/callgrind.sh --omniorb  # also: omniORB's client and server, counted alike
#   examples/bench/callgrind.sh --workload lat-async [--client-args '--no-driver']
#                                          # the same per lat-async call (or another workload
#                                          # of 2,200 + 22,000 calls), extra client arguments
#
# Needs valgrind, objdump (binutils), addr2line (for --where) and python3; --omniorb needs what
# examples/bench/omniorb/build.sh needs (omniORB 4, omniidl, g++, pkg-config).
#
# Per call = (run of 22,000 calls - run of 2,200 calls) / 19,800, so start-up and shutdown
# cancel out. Instructions are the whole process's (the ORB, std or libstdc++, libc, the kernel
# excluded), so the ORB and omniORB (whose code is in libomniORB4.so) are counted alike. An "atomic" is an executed `lock`-prefixed instruction or an `xchg` with memory
# (what locks, reference counts and atomic counters compile to): callgrind counts one as one
# instruction, but on the 2-vCPU Xeon of PROFILE.md one costs ~6 ns (a lock and its unlock
# ~12 ns), as much as ~25 ordinary instructions. Only the benchmark binary's own code is
# counted (the ORB, std, bytes, prost...), not libc's.
# "Hot code" is the size of the code run on every call: the 64-byte lines (instruction cache
# lines) holding an instruction that ran about once per call or more (at least 90% of the
# calls' count: until 2026-12-06, exactly the calls' count, which flickered by ±25 lines),
# in any object of the process
# (libc, omniORB's libraries). Code that does not fit the CPU's level-1 instruction cache
# (32 KiB here, shared with the kernel's system calls, TCP and scheduler between two calls)
# is fetched again, so two programs of equal instruction counts can run at different speeds
# (PROFILE.md, "2026-11-27, late night").
set -euo pipefail

where=0 omni=0 workload=lat client_args=""
while [ $# -gt 0 ]; do
    case "$1" in
        --where) where=1 ;;
        --omniorb) omni=1 ;;
        --workload) workload="$2"; shift ;;
        --client-args) client_args="$2"; shift ;;
        *) echo "callgrind.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for tool in valgrind objdump python3; do
    command -v "$tool" > /dev/null || { echo "callgrind.sh: needs $tool" >&2; exit 1; }
done
[ -n "${CALLGRIND_NO_BUILD:-}" ] || (cd "$root" && CARGO_PROFILE_PERF_DEBUG=line-tables-only cargo build --quiet --profile perf -p orb-bench)
bin="$target/perf/orb-bench"

# One lat run under callgrind (server and client) of binary $3; $1 names it, $2 is "--quick"
# or empty. Both benchmark binaries take the same arguments and print the same start line.
run() {
    local port
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/server-$1.out" \
        "$3" server --port "$port" --threads 2 2> "$work/server-$1.err" > /dev/null &
    local pid=$! up=""
    for _ in $(seq 200); do
        grep -q "listening on" "$work/server-$1.err" 2> /dev/null && up=1 && break
        sleep 0.1
    done
    [[ -n "$up" ]] || { echo "callgrind.sh: the server $3 did not start" >&2; exit 1; }
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/client-$1.out" \
        "$3" client --port "$port" "$workload" $2 $client_args > /dev/null 2> "$work/client-$1.err"
    kill -TERM "$pid"
    wait "$pid" 2> /dev/null || true
}
run quick --quick "$bin"
run full "" "$bin"
if [[ "$omni" == 1 ]]; then
    omnibin="$("$root/examples/bench/omniorb/build.sh" "$target/omniorb-bench")"
    run omni-quick --quick "$omnibin"
    run omni-full "" "$omnibin"
fi
objdump -d --no-show-raw-insn "$bin" | awk '/\tlock |\txchg .*\(/ { sub(":", "", $1); print $1 }' \
    > "$work/atomic-addrs"

python3 - "$work" "$bin" "$where" "$omni" << 'EOF'
import collections, re, subprocess, sys

work, binary, where, omni = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
atomic = {int(a, 16) for a in open(f"{work}/atomic-addrs").read().split()}
CALLS = 22000 - 2200
FULL_CALLS = 22000

# The client's sort of its latencies after the calls (for p50 and p99): O(n log n), so the
# difference of the two runs would count part of it as work per call (~120 instructions in the
# ORB's client, 2026-12-07). Its inclusive cost is left out, on every implementation alike;
# only a sort the benchmark's own code calls (not the ORB's, nor a shared library's): an ORB
# that sorted on every call would still be counted.
SORT = re.compile(r"core::slice::sort::|std::__introsort_loop|std::__final_insertion_sort"
                  r"|std::__sort<|std::sort<|\bqsort\b")

def benchmark_code(obj, fn):
    """Whether `fn` (in object `obj`) is the benchmark's own code: in the executable, not in a
    shared library (omniORB's code), not the ORB's (linked into the executable) nor a sort."""
    return (obj is not None and ".so" not in obj.rsplit("/", 1)[-1]
            and "protorb::" not in fn and not SORT.search(fn))

def parse(path):
    """Total Ir (less the final sort's), executed atomics per instruction address of the
    benchmark binary, Ir per instruction address of the whole process (for the hot code's
    size), and the final sort's Ir."""
    total, atomics, irs = 0, collections.Counter(), collections.Counter()
    names, obj, addr, line, after_calls = {}, None, 0, 0, False
    fns, fn, cfn, sort_ir = {}, "", "", 0
    def num(tok, prev):
        if tok == "*":
            return prev
        if tok.startswith("0x"):
            return int(tok, 16)
        if tok[0] in "+-":
            return prev + int(tok)
        return int(tok)
    for raw in open(path):
        if raw.startswith("summary:"):
            total = int(raw.split()[1])
        m = re.match(r"(c?ob)=\((\d+)\)\s*(.*)", raw.strip())
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                obj = names.get(m.group(2))
            continue
        m = re.match(r"(c?fn)=\((\d+)\)\s*(.*)", raw.strip())
        if m:
            if m.group(3):
                fns[m.group(2)] = m.group(3)
            if m.group(1) == "fn":
                fn = fns.get(m.group(2), "")
            else:
                cfn = fns.get(m.group(2), "")
            continue
        if raw.startswith("calls="):
            after_calls = True  # the next cost line is the call's inclusive cost
            continue
        if not raw or not (raw[0].isdigit() or raw[0] in "+-*"):
            continue
        parts = raw.split()
        if len(parts) < 3:
            continue
        addr, line = num(parts[0], addr), num(parts[1], line)
        if after_calls:
            after_calls = False
            # A sort the benchmark's code enters: its whole cost, once.
            if SORT.search(cfn) and benchmark_code(obj, fn):
                sort_ir += int(parts[2])
            continue
        if SORT.search(fn):
            continue  # a sort's code is not counted as hot code (its instructions still are)
        irs[addr] += int(parts[2])
        if obj and obj.endswith("orb-bench") and addr in atomic:
            atomics[addr] += int(parts[2])
    return total - sort_ir, atomics, irs, sort_ir

def hot_code(irs):
    """The code run on every call: the 64-byte lines (an instruction cache line) holding an
    instruction executed at least once per call of the full run, start-up included, give or
    take a tenth: code of every call that runs a call or two fewer times than the calls (not
    for the first or the last) counts. With the exact count as the bar, such lines came and
    went between two runs of one build (429 to 452 lines, 2026-12-06 night)."""
    lines = {a // 64 for a, n in irs.items() if n >= FULL_CALLS * 9 // 10}
    return f"hot code {len(lines)} lines of 64 B ({len(lines) * 64 / 1024:.1f} KiB)"

for side in ("server", "client"):
    (tq, aq, _, sq), (tf, af, irs, sf) = (parse(f"{work}/{side}-quick.out"),
                                          parse(f"{work}/{side}-full.out"))
    per = {a: (af[a] - aq[a]) / CALLS for a in af}
    print(f"{side}: {(tf - tq) / CALLS:,.0f} instructions, "
          f"{sum(per.values()):.1f} atomic read-modify-writes per call; {hot_code(irs)}"
          + (f"; final sort left out: {(sf - sq) / CALLS:,.0f} a call" if sf else ""))
    if where:
        for addr, n in sorted(per.items(), key=lambda kv: -kv[1]):
            if n < 0.5:
                continue
            out = subprocess.run(["addr2line", "-f", "-i", "-C", "-e", binary, hex(addr)],
                                 capture_output=True, text=True).stdout.split("\n")
            chain = [loc.split("/")[-1] for loc in out[1::2]
                     if any(k in loc for k in ("orb/src", "bytes-", "examples/", "prost-"))]
            print(f"  {n:5.1f}  {' <- '.join(chain[:4]) or hex(addr)}")

if omni:
    # omniORB's own code is in shared libraries, which the atomics count above does not read;
    # the instructions are counted as for the ORB: the whole process, per call.
    for side in ("server", "client"):
        (tq, _, _, sq), (tf, _, irs, sf) = (parse(f"{work}/{side}-omni-quick.out"),
                                            parse(f"{work}/{side}-omni-full.out"))
        print(f"omniORB {side}: {(tf - tq) / CALLS:,.0f} instructions per call; {hot_code(irs)}"
              + (f"; final sort left out: {(sf - sq) / CALLS:,.0f} a call" if sf else ""))
EOF
