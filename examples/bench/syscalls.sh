#!/usr/bin/env bash
# System calls per call, server and client, counted by the kernel's tracepoints: numbers that
# do not move with the machine's load (unlike wall-clock time), and that show work an
# instruction count cannot (a system call's cost is mostly in the kernel, which callgrind
# does not see). Both processes on CPU 0, as run.sh's `lat`.
#
#   examples/bench/syscalls.sh                       # lat, the perf build of orb-bench
#   examples/bench/syscalls.sh --workload lat-async  # any client workload (lat-async, big...)
#   examples/bench/syscalls.sh --impl raw            # another implementation, both sides
#   examples/bench/syscalls.sh --bin PATH            # a given orb-bench binary (no build)
#   examples/bench/syscalls.sh --client-args '--client-threads 2'   # extra client arguments
#
# Needs perf (Debian: linux-perf) with access to the syscalls tracepoints (root, or
# kernel.perf_event_paranoid <= -1), taskset and python3. Per call = the process's count over
# the client's whole run (warm-up and start-up included) / the calls the client made (the
# orb's requests_sent; for the others, lat's and lat-async's 22,000), so a count below 0.01
# per call is start-up or a periodic look. Found with it: PROFILE.md, "2026-11-29".
set -euo pipefail

workload=lat impl=orb bin="" client_args=""
while [ $# -gt 0 ]; do
    case "$1" in
        --workload) workload="$2"; shift ;;
        --impl) impl="$2"; shift ;;
        --bin) bin="$2"; shift ;;
        --client-args) client_args="$2"; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "syscalls.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
for tool in perf taskset python3; do
    command -v "$tool" > /dev/null || { echo "syscalls.sh: needs $tool" >&2; exit 1; }
done
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ -z "$bin" ]; then
    (cd "$root" && cargo build --quiet --profile perf -p orb-bench)
    bin="${CARGO_TARGET_DIR:-$root/target}/perf/orb-bench"
fi
work="$(mktemp -d)"
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2> /dev/null
    rm -rf "$work"
}
trap cleanup EXIT

events="context-switches"
for s in recvfrom recvmsg read sendto sendmsg write writev epoll_wait epoll_pwait epoll_ctl \
    poll ppoll futex timerfd_settime clock_gettime setsockopt ioctl; do
    events="$events,syscalls:sys_enter_$s"
done
if ! perf stat -e syscalls:sys_enter_futex true > /dev/null 2>&1; then
    echo "syscalls.sh: perf cannot read the syscalls tracepoints here (root, or" \
        "sysctl kernel.perf_event_paranoid=-1)" >&2
    exit 1
fi

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
taskset -c 0 "$bin" server --port "$port" --threads 2 --impl "$impl" \
    > /dev/null 2> "$work/server.err" &
server=$!
for _ in $(seq 200); do
    grep -q "listening on" "$work/server.err" 2> /dev/null && break
    sleep 0.05
done
grep -q "listening on" "$work/server.err" || { echo "syscalls.sh: the server did not start" >&2; exit 1; }
perf stat -x, -e "$events" -p "$server" -o "$work/server.csv" &
watcher=$!
sleep 0.3 # perf attaches to the server's threads
taskset -c 0 perf stat -x, -e "$events" -o "$work/client.csv" \
    "$bin" client --port "$port" "$workload" --impl "$impl" $client_args > "$work/client.json" 2> "$work/client.err"
kill -INT "$watcher"
wait "$watcher" 2> /dev/null || true

python3 - "$work" "$impl" "$workload" << 'EOF'
import json, sys
work, impl, workload = sys.argv[1:4]
record = json.loads(open(f"{work}/client.json").read().strip().splitlines()[-1])
# The calls the client made, warm-up included: the orb client's requests_sent (on stderr);
# otherwise the calls timed plus the warm-up of lat and lat-async (2,000; other workloads'
# warm-ups are timed, so their counts per call are a little high).
sent = [w for w in open(f"{work}/client.err").read().split() if w.startswith("requests_sent=")]
if sent:
    calls = int(sent[0].split("=")[1])
else:
    calls = record["calls"] + (2000 if workload.startswith("lat") else 0)
def counts(path):
    out = {}
    for line in open(path):
        parts = line.strip().split(",")
        if len(parts) < 3 or not parts[0].replace(".", "").isdigit():
            continue
        name = parts[2].replace("syscalls:sys_enter_", "")
        out[name] = int(float(parts[0]))
    return out
print(f"{impl} {workload}: {calls:,} calls (p50 {record.get('p50_us', 'n/a')} us, not a "
      f"measurement here: perf is attached)")
for side in ("server", "client"):
    c = counts(f"{work}/{side}.csv")
    total = sum(v for k, v in c.items() if k != "context-switches")
    rows = ", ".join(f"{k} {v / calls:.3f}" for k, v in sorted(c.items(), key=lambda kv: -kv[1])
                     if v and k != "context-switches")
    print(f"  {side}: {total / calls:.2f} system calls per call ({rows}); "
          f"context switches {c.get('context-switches', 0) / calls:.2f}")
EOF
