#!/usr/bin/env bash
# Peak RSS of gate-dist on the memory-bound cases (bench/memory_cases.py):
# open requests with large endpoint dumps, millions of open request ids,
# tens of thousands of deployments; and of recommend on millions of vLLM
# stats lines; and of `gate-dist --follow` over an hour of log at about
# 110 decisions a second (four simulated peak-sweep streams merged by
# time, 6.6 GB, piped in as they are made: nothing written to disk);
# and of `recommend --follow` over the same hour with the engines' vLLM
# logs (written to disk: about 7 GB more, deleted with the rest).
# Run by `just memory`; the figures are in docs/performance.md ("Memory
# bounds", "Follow mode").
#
# Environment:
#   MEMORY_DIR        where the cases are written (default /tmp/gatecal-memory;
#                     about 5.6 GB; deleted at the end unless MEMORY_KEEP=1)
#   MEMORY_THREADS    thread counts to run (default "2 8")
#   MEMORY_FOLLOW     seconds of log time of the follow cases (default 3600;
#                     0 skips them)
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
cargo build --release --locked -p gate-dist --bin gate-dist -p gatecal-recommend --bin recommend \
    -p gatecal-sim --bin epp-sim
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
follow="${MEMORY_FOLLOW:-3600}"
if [[ "$follow" != 0 ]]; then
    sim() { "$target/release/epp-sim" --scenario peak-sweep --seed "$1" --duration "$follow" --no-vllm --timestamps; }
    for window in 15m 1m; do
        # The four streams merged by their kubelet times, read as fast as
        # they come; one report every 2 s (of wall time), so that reports
        # fall at every point of the log and the peak does not depend on
        # where a few of them fall. Measured (docs/performance.md, "Follow
        # mode"), --window 15m: 60.2 MiB, against 64.3 MiB before follow
        # mode set mimalloc's purge delay to 0 (MIMALLOC_PURGE_DELAY
        # in the environment overrides it), 81.0 MiB before a
        # decision's names were shared (interned per input) and 135.2 MiB
        # before the reports' audits took the window in order without
        # their reorder buffers, at most 1 024 decisions waited for their
        # bar, the scored endpoints had vectors of their own and the whole
        # run's audit made the records alone.
        LC_ALL=C sort -m <(sim 1) <(sim 2) <(sim 3) <(sim 4) |
            nice -n 10 "$timer" -v -o "$dir/time.txt" "$target/release/gate-dist" --follow - \
                --window "$window" --every 2s --format json > "$dir/follow.jsonl"
        rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time.txt")
        decisions=$(tail -n 1 "$dir/follow.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["follow"]["decisions_read"])')
        printf '%-11s %6ss  --window %-3s  %s decisions  max RSS %6.1f MiB  wall %s\n' \
            follow "$follow" "$window" "$decisions" "$(echo "$rss / 1024" | bc -l)" "$wall"
    done
    # recommend: the four EPP logs merged on stdin, the four folders of
    # vLLM logs followed (52 files); SIGINT once stdin is read (files are
    # followed until then). Measured: 182.8 MiB (185.6 MiB before follow
    # mode set mimalloc's purge delay to 0 and the window's vLLM lines
    # were made smaller), against 341.0 MiB before the whole run's
    # calibration made the records alone.
    for seed in 1 2 3 4; do
        [[ -f "$dir/rec$seed/epp.log" ]] ||
            nice -n 10 "$target/release/epp-sim" --scenario peak-sweep --seed "$seed" \
                --duration "$follow" --timestamps --out "$dir/rec$seed/epp.log" 2>/dev/null &
    done
    wait
    rm -f "$dir"/rec?/epp.truth.jsonl "$dir/epp.fifo"
    mkfifo "$dir/epp.fifo"
    nice -n 10 "$timer" -v -o "$dir/time.txt" "$target/release/recommend" --follow - \
        "$dir"/rec?/epp.vllm --every 2s --format json < "$dir/epp.fifo" > "$dir/follow.jsonl" &
    timed=$!
    LC_ALL=C sort -m "$dir"/rec?/epp.log > "$dir/epp.fifo"
    sleep 3
    pkill -INT -P "$timed" || true
    wait "$timed" || true
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time.txt")
    decisions=$(tail -n 1 "$dir/follow.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["follow"]["decisions_read"])')
    printf '%-11s %6ss  --window 15m  %s decisions, vLLM logs  max RSS %6.1f MiB  wall %s\n' \
        recommend "$follow" "$decisions" "$(echo "$rss / 1024" | bc -l)" "$wall"
fi
[[ "${MEMORY_KEEP:-0}" == 1 ]] || rm -rf "$dir"
