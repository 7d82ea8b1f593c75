#!/usr/bin/env bash
# Peak RSS of gate-dist on the memory-bound cases (bench/memory_cases.py):
# open requests with large endpoint dumps, millions of open request ids,
# tens of thousands of deployments; and of recommend on millions of vLLM
# stats lines. Run by `just memory`; the figures are in
# docs/performance.md ("Memory bounds").
#
# Environment:
#   MEMORY_DIR        where the cases are written (default /tmp/gatecal-memory;
#                     about 5.6 GB; deleted at the end unless MEMORY_KEEP=1)
#   MEMORY_THREADS    thread counts to run (default "2 8")
#   CARGO_TARGET_DIR  honoured (default target/)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
dir="${MEMORY_DIR:-/tmp/gatecal-memory}"
threads="${MEMORY_THREADS:-2 8}"
target="${CARGO_TARGET_DIR:-$root/target}"
timer=/usr/bin/time
[[ -x "$timer" ]] || { echo "memory: $timer (GNU time) is needed for the peak RSS" >&2; exit 2; }

cd "$root"
cargo build --release --locked -p gate-dist --bin gate-dist -p gatecal-recommend --bin recommend
mkdir -p "$dir"
for case in big-dumps huge-dumps open-ids namespaces vllm-lines; do
    bin="$target/release/gate-dist"
    [[ "$case" == vllm-lines ]] && bin="$target/release/recommend"
    log="$dir/$case.log"
    [[ -f "$log" ]] || nice -n 10 python3 "$here/memory_cases.py" "$case" "$log"
    size=$(stat -c %s "$log")
    for j in $threads; do
        # Exit 3 (no filter decisions) is expected of the cases without any.
        nice -n 10 "$timer" -v -o "$dir/time.txt" "$bin" "$log" -j "$j" --format json -q \
            -o "$dir/report.json" 2>/dev/null || true
        rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time.txt")
        printf '%-11s %6d MB  -j%-2s  max RSS %6.1f MiB  wall %s\n' \
            "$case" $((size / 1000000)) "$j" "$(echo "$rss / 1024" | bc -l)" "$wall"
    done
done
[[ "${MEMORY_KEEP:-0}" == 1 ]] || rm -rf "$dir"
