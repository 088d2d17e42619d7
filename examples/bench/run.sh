#!/usr/bin/env bash
# Runs the ORB, the raw-TCP baseline and tonic side by side (shared/bench/PROTOCOL.md) and prints a
# markdown table of the medians, with the ORB's ratio to raw, the targets and pass/fail.
#
#   examples/bench/run.sh            # the protocol's parameters, 3 runs (about 2 minutes)
#   examples/bench/run.sh --quick    # smoke run: 1 run, fewer calls (about 10 s after the build)
#   examples/bench/run.sh --runs 5   # more runs
#   examples/bench/run.sh --pin none # let the scheduler place the processes (see below)
#
# Each run, for each workload (lat, tput 32, big), starts a fresh orb server (2 pool threads)
# and a fresh raw server (a thread per connection) on free ports, runs the client against each
# (the orb client ORB has 0 pool threads for lat and big, 2 for tput; see orb-bench's docs),
# stops the server with SIGTERM and keeps both JSON lines, so the server's context switches per
# call belong to that workload alone. Then `nest --depth 1000 --threads 1` (two processes), and
# the same with `--bidir` (callbacks over the caller's connection). `lat_pool` is orb's lat
# again with the client ORB's default 2 pool threads (a row without a target: what a caller
# on a default ORB sees; the pool threads must not cost it a wake-up or a system call).
# `lat_listen` is orb's lat with a client ORB that listens (`--listen`: a server process
# calling out, whose callers wait through the pool's poll; a row without a target).
# The raw records and the table go to $CARGO_TARGET_DIR/orb-bench/ (default target/).
#
# lat also runs `--impl raw-epoll` (a diagnostic, not a target: raw with an epoll wait before
# each read), which splits the ORB's cost over raw into the event loop's system calls and the
# ORB's own code.
#
# orb-tls (`--impl orb-tls`: the ORB over mutual TLS, rustls) runs lat, tput and big beside orb,
# for the cost of TLS per call (a comparison row, no target).
# tonic (gRPC, `--impl tonic`) runs lat, tput, big and the asynchronous workloads, for
# comparison rows without a target. `lat-async` (orb and tonic; pinned like lat) and
# `tput-async 1000` (orb and tonic; unpinned like tput) measure asynchronous calls from one
# client thread on a tokio current-thread runtime (README, "Asynchronous workloads").
#
# Where omniORB is installed (Debian: libomniorb4-dev omniidl g++ pkg-config), lat, tput and
# big also run omniORB (examples/bench/omniorb: a C++ client and server under the same
# protocol, built here with omniidl and g++) for a comparison row without a target.
#
# tput runs twice per run: with no pinning (`tput`, the scheduler places every thread) and with
# the server on CPU 0 and the client on CPU 1 (`tput_split`, as if each had its own machine;
# skipped without taskset or with one CPU). Both are in the table: they rank orb and raw in
# opposite order on the VM this was written on, and why is in the README's performance section.
#
# CPU placement (--pin): `same` (the default) runs the server and the client of lat and big, and
# both processes of nest, on CPU 0; the first tput is never pinned (it needs both cores). `split` puts the
# server on CPU 0 and the client on CPU 1; `none` pins nothing. Why: on the 2-vCPU VM this was
# written on, waking a thread on the other, idle vCPU costs tens of microseconds (raw lat p50:
# about 8 us on one CPU, about 75 us across two), and the scheduler picks one or the other from
# run to run, which swamps the software cost the table is meant to show.
# Exits non-zero if any command failed or any reply was wrong (a missed target is not a failure
# of the script: the table says FAIL).
set -euo pipefail

quick=0
runs=3
pin=same
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; runs=1 ;;
        --runs) runs="$2"; shift ;;
        --pin) pin="$2"; shift ;;
        -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

if [ "$pin" != none ] && ! command -v taskset > /dev/null; then
    echo "taskset not found: not pinning" >&2
    pin=none
fi
split_tput=tput_split
if ! command -v taskset > /dev/null || [ "$(nproc)" -lt 2 ]; then
    echo "taskset not found or one CPU: no tput run with split placement" >&2
    split_tput=""
fi
case "$pin" in
    same) srv_cpu=0; cli_cpu=0; placement="server and client on CPU 0" ;;
    split) srv_cpu=0; cli_cpu=1; placement="server on CPU 0, client on CPU 1" ;;
    none) srv_cpu=""; cli_cpu=""; placement="not pinned" ;;
    *) echo "--pin takes same, split or none" >&2; exit 2 ;;
esac
# pinned CPU: sets the array `pfx` to the command prefix that runs a program on CPU (none if
# CPU is empty). A prefix, not a wrapper function, so that `$!` is the program's own pid.
pinned() {
    if [ -n "$1" ]; then pfx=(taskset -c "$1"); else pfx=(); fi
}

root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
cd "$root"
echo "building orb-bench (profile perf: release + fat LTO)..." >&2
cargo build --profile perf --quiet -p orb-bench
bin="$target/perf/orb-bench"
# omniORB, the C++ ORB we compare with, where it is installed (no target: a comparison).
omni_impl=""
if omni_bin="$(examples/bench/omniorb/build.sh "$target/omniorb" 2> "$target/omniorb-build.log")"; then
    omni_impl=omniorb
else
    echo "omniORB comparison skipped: $(tail -n 1 "$target/omniorb-build.log")" >&2
fi
# bin_for IMPL: the program that implements IMPL.
bin_for() {
    if [ "$1" = omniorb ]; then echo "$omni_bin"; else echo "$bin"; fi
}

outdir="$target/orb-bench"
mkdir -p "$outdir"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
results="$outdir/results-$stamp.jsonl"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
: > "$results"

client_flags=()
[ "$quick" = 1 ] && client_flags+=(--quick)
failed=0

# start_server IMPL THREADS CPU: starts a server on a free port; sets server_pid, server_port.
start_server() {
    local imp="$1" threads="$2" cpu="$3"
    # Truncate here: the background job's own redirection may happen after the first look.
    : > "$work/server.json"
    : > "$work/server.err"
    pinned "$cpu"
    "${pfx[@]+"${pfx[@]}"}" "$(bin_for "$imp")" server --port 0 --threads "$threads" --impl "$imp" \
        > "$work/server.json" 2> "$work/server.err" &
    server_pid=$!
    server_port=""
    for _ in $(seq 1 200); do
        server_port="$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/server.err")"
        [ -n "$server_port" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "server ($imp) did not start:" >&2
    cat "$work/server.err" >&2
    return 1
}

# stop_server: SIGTERM, wait (SIGKILL after 10 s); the server's JSON line is in server.json.
stop_server() {
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 200); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
}

# record RUN IMPL WORKLOAD CLIENT_JSON SERVER_JSON
record() {
    local server="${5:-null}"
    [ -n "$server" ] || server=null
    printf '{"run":%s,"impl":"%s","workload":"%s","client":%s,"server":%s}\n' \
        "$1" "$2" "$3" "$4" "$server" >> "$results"
}

# one RUN IMPL NAME [ARGS...]: one client run against a fresh server. NAME is the workload
# (lat, tput, big), tput_split: tput with the server on CPU 0 and the client on CPU 1, or
# lat_pool: lat (pinned alike) with ARGS `--client-threads 2`, or lat_listen: lat (pinned
# alike) with ARGS `--listen`.
one() {
    local run="$1" imp="$2" name="$3" wl="$3"
    shift 3
    local threads=2 scpu="$srv_cpu" ccpu="$cli_cpu"
    case "$name" in
        tput | tput-async) scpu=""; ccpu="" ;;
        tput_split) wl=tput; scpu=0; ccpu=1 ;;
        lat_pool | lat_listen) wl=lat ;;
    esac
    start_server "$imp" "$threads" "$scpu" || { failed=1; return 0; }
    local client
    pinned "$ccpu"
    if client="$("${pfx[@]+"${pfx[@]}"}" "$(bin_for "$imp")" client --impl "$imp" --port "$server_port" "$wl" "$@" \
        "${client_flags[@]+"${client_flags[@]}"}" 2> "$work/client.err")"; then
        :
    else
        echo "client $imp $wl failed:" >&2
        cat "$work/client.err" >&2
        failed=1
    fi
    stop_server
    local server
    server="$(tail -n 1 "$work/server.json")"
    if [ -n "$client" ]; then
        record "$run" "$imp" "$name" "$client" "$server"
    fi
    echo "  $imp $name: $client" >&2
    echo "  $imp server: $server" >&2
}

# How busy the CPUs were just before the runs (2 s sample of /proc/stat): anything above a
# few percent is another process disturbing the measurement.
cpu_ticks() { awk '/^cpu /{idle=$5+$6; t=0; for(i=2;i<=NF;i++) t+=$i; print t, idle}' /proc/stat; }
read -r t0 i0 < <(cpu_ticks)
sleep 2
read -r t1 i1 < <(cpu_ticks)
busy_before=$(( (t1 - t0 - (i1 - i0)) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1) ))
busy_note=""
if [ "$busy_before" -gt 10 ]; then
    busy_note=" WARNING: other processes were using the CPUs; these numbers are disturbed."
    echo "warning: the CPUs were ${busy_before}% busy before the runs" >&2
fi
for run in $(seq 1 "$runs"); do
    echo "run $run of $runs" >&2
    # Order: the two numbers of a ratio with a target run back to back (orb lat-async just
    # before orb lat, then raw, then omniORB), because this VM's speed drifts between runs a
    # minute apart (PROFILE.md, 2026-11-26: per-run lat p50 ratios of 1.81, 0.99 and 1.83).
    for wl in lat_listen lat-async lat_pool lat tput $split_tput tput-async big; do
        case "$wl" in
            lat_pool | lat_listen) impls="orb" ;;
            lat) impls="orb raw $omni_impl raw-epoll orb-tls tonic" ;;
            lat-async) impls="tonic orb" ;;
            tput-async) impls="orb tonic" ;;
            tput_split) impls="orb raw tonic $omni_impl" ;;
            *) impls="orb orb-tls raw tonic $omni_impl" ;;
        esac
        for imp in $impls; do
            case "$wl" in
                tput-async) one "$run" "$imp" "$wl" 1000 ;;
                tput*) one "$run" "$imp" "$wl" 32 ;;
                lat_pool) one "$run" "$imp" "$wl" --client-threads 2 ;;
                lat_listen) one "$run" "$imp" "$wl" --listen ;;
                *) one "$run" "$imp" "$wl" ;;
            esac
        done
    done
    for imp in orb raw; do
        nest_cpu="$cli_cpu"
        [ "$pin" = split ] && nest_cpu=""
        pinned "$nest_cpu"
        if nest="$("${pfx[@]+"${pfx[@]}"}" "$bin" nest --impl "$imp" --depth 1000 --threads 1 2> "$work/nest.err")"; then
            :
        else
            echo "nest ($imp) failed:" >&2
            cat "$work/nest.err" >&2
            failed=1
        fi
        [ -n "$nest" ] && record "$run" "$imp" nest "$nest" null
        echo "  $imp nest: $nest" >&2
        if [ "$imp" = orb ]; then
            # The same with bidirectional GIOP: callbacks over the caller's connection.
            pinned "$nest_cpu"
            if nest="$("${pfx[@]+"${pfx[@]}"}" "$bin" nest --impl orb --bidir --depth 1000 --threads 1 2> "$work/nest.err")"; then
                [ -n "$nest" ] && record "$run" orb-bidir nest "$nest" null
                echo "  orb-bidir nest: $nest" >&2
            else
                echo "nest (orb, bidir) failed:" >&2
                cat "$work/nest.err" >&2
                failed=1
            fi
        fi
    done
done

model="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
{
    echo "## orb vs raw TCP ($([ "$quick" = 1 ] && echo "QUICK smoke run, not the protocol's parameters" || echo "protocol parameters"))"
    echo
    echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'). Machine: $(nproc) CPUs, ${model:-unknown CPU}, Linux $(uname -r), $(rustc --version)."
    echo "CPU busy just before the runs (other processes): ${busy_before}%.${busy_note} CPU placement (--pin $pin): lat, big and nest $placement; tput not pinned; tput split: server on CPU 0, client on CPU 1."
    echo
    "$bin" report "$results"
} | tee "$outdir/table-$stamp.md"
echo >&2
echo "records: $results" >&2
echo "table:   $outdir/table-$stamp.md" >&2
exit "$failed"
