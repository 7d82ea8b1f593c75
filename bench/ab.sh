#!/usr/bin/env bash
# Interleaved A/B timing of whole commands: each command once per round, for
# REPS rounds, so that drift on a shared machine hits all of them alike.
# Prints per command the least and the median CPU time (perf stat's
# task-clock), the median wall time and the largest peak RSS (GNU time).
#
#   bash bench/ab.sh REPS "cmd A" "cmd B" ...
#
# Example (docs/performance.md, "The paired run", which builds the old one):
#   git worktree add /tmp/old e2e9262 && (cd /tmp/old && cargo build --release -p gate-dist)
#   bash bench/ab.sh 5 "/tmp/old/target/release/gate-dist -j2 --format json bench-data/bench.log" \
#                      "target/release/gate-dist -j2 --format json bench-data/bench.log"
set -euo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: bash bench/ab.sh REPS \"command\" [\"command\" ...]" >&2
    exit 2
fi
reps=$1
shift
cmds=("$@")
for tool in perf /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench/ab.sh: $tool is needed" >&2; exit 2; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= reps; r++)); do
    for i in "${!cmds[@]}"; do
        # shellcheck disable=SC2086
        perf stat -x, -e task-clock -- ${cmds[$i]} >/dev/null 2>"$tmp/err"
        cpu=$(grep task-clock "$tmp/err" | cut -d, -f1)
        # shellcheck disable=SC2086
        /usr/bin/time -o "$tmp/t" -f "%e %M" ${cmds[$i]} >/dev/null 2>/dev/null
        echo "$cpu $(tail -1 "$tmp/t")" >>"$tmp/$i"
    done
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for i in "${!cmds[@]}"; do
    cmin=$(cut -d' ' -f1 "$tmp/$i" | sort -n | head -1)
    cmed=$(cut -d' ' -f1 "$tmp/$i" | median)
    wmed=$(cut -d' ' -f2 "$tmp/$i" | median)
    rss=$(cut -d' ' -f3 "$tmp/$i" | sort -n | tail -1)
    printf 'CPU min %8.1f ms  median %8.1f ms  wall median %6.3f s  RSS max %7d KiB  %s\n' \
        "$cmin" "$cmed" "$wmed" "$rss" "${cmds[$i]}"
done
