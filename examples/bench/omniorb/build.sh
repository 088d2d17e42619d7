#!/usr/bin/env bash
# Builds omniorb-bench (omniorb_bench.cc, bench.idl) into DIR with omniidl, g++ and omniORB 4
# (Debian: libomniorb4-dev omniidl g++ pkg-config). Prints the program's path; exits 1, with
# the reason on stderr, if a tool or the library is missing.
#
#   examples/bench/omniorb/build.sh DIR
set -euo pipefail
dir="${1:?usage: build.sh DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
for tool in omniidl "${CXX:-g++}" pkg-config; do
    command -v "$tool" > /dev/null || { echo "$tool not found" >&2; exit 1; }
done
pkg-config --exists omniORB4 || { echo "omniORB4 not found by pkg-config" >&2; exit 1; }
mkdir -p "$dir"
bin="$dir/omniorb-bench"
if [ ! -x "$bin" ] || [ "$here/omniorb_bench.cc" -nt "$bin" ] || [ "$here/bench.idl" -nt "$bin" ]; then
    omniidl -bcxx -C "$dir" "$here/bench.idl"
    # shellcheck disable=SC2046 # pkg-config's flags are meant to split
    "${CXX:-g++}" -O2 -std=c++17 -I "$dir" -o "$bin" "$here/omniorb_bench.cc" "$dir/benchSK.cc" \
        $(pkg-config --cflags --libs omniORB4) -lpthread
fi
echo "$bin"
