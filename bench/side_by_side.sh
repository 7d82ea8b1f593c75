#!/usr/bin/env bash
# Side-by-side throughput and peak memory of gate-dist against the I/O
# ceiling (`cat`) and the Python baseline (../shared/bench/), on one large
# simulated EPP log. Run by `just bench`; see docs/performance.md.
#
# Environment:
#   BENCH_REPS     repetitions of each command (default 3; the median is reported)
#   BENCH_FILE     the log (default bench-data/bench.log, generated if missing)
#   BENCH_BYTES    size of a generated log (default 1100000000)
#   BENCH_SIM_ARGS simulator flags of a generated log
#                  (default: eight deployments interleaved, full endpoint dumps)
#   BENCH_PYTHON   the Python interpreter (default python3)
#   CARGO_TARGET_DIR  honoured (default target/)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
shared="$(cd "$root/../shared" 2>/dev/null && pwd || true)"
baseline="${shared:+$shared/bench/baseline_gate_dist.py}"
reps="${BENCH_REPS:-3}"
file="${BENCH_FILE:-$root/bench-data/bench.log}"
bytes_wanted="${BENCH_BYTES:-1100000000}"
sim_args="${BENCH_SIM_ARGS:---scenario eight-deployments --seed 1 --full-dumps --no-vllm}"
python="${BENCH_PYTHON:-python3}"
target="${CARGO_TARGET_DIR:-$root/target}"
timer=/usr/bin/time

if [[ -z "$baseline" || ! -f "$baseline" ]]; then
    echo "bench: baseline not found (expected ../shared/bench/baseline_gate_dist.py next to the repository)" >&2
    exit 2
fi
if [[ ! -x "$timer" ]]; then
    echo "bench: $timer (GNU time) is needed for the peak RSS" >&2
    exit 2
fi

cd "$root"
echo "== building (release)"
cargo build --release --locked -p gate-dist -p gatecal-sim --bin gate-dist --bin epp-sim
cargo build --release --locked -p gatecal-parser --example parse_file
gate_dist="$target/release/gate-dist"
parse_file="$target/release/examples/parse_file"

if [[ ! -s "$file" ]]; then
    echo "== generating $file ($bytes_wanted bytes)"
    mkdir -p "$(dirname "$file")"
    # shellcheck disable=SC2086
    "$target/release/epp-sim" $sim_args --target-bytes "$bytes_wanted" --out "$file"
fi
size=$(stat -c %s "$file")

echo "== machine"
echo "nproc:  $(nproc)"
echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; the cores may be shared)"
echo "file:   $file ($size bytes, $(wc -l <"$file") lines)"

echo "== warming the page cache"
cat "$file" >/dev/null
cat "$file" >/dev/null

names=("cat" "python baseline" "gate-dist -j1" "gate-dist -j2" "parser only -j1" "parser only -j2")
cmds=(
    "cat '$file' >/dev/null"
    "'$python' '$baseline' '$file' >/dev/null"
    "'$gate_dist' '$file' --format json -j1 --quiet >/dev/null"
    "'$gate_dist' '$file' --format json -j2 --quiet >/dev/null"
    "'$parse_file' '$file' >/dev/null"
    "'$parse_file' --threads 2 '$file' >/dev/null"
)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Rounds: every command once per round, so drift (other load on the
# machine) hits all of them alike.
for ((r = 1; r <= reps; r++)); do
    # The page cache of these VMs is small and shared: warm it again.
    cat "$file" >/dev/null
    echo "== round $r/$reps (load $(cut -d' ' -f1 /proc/loadavg))"
    for i in "${!cmds[@]}"; do
        "$timer" -f '%e %M %U %S' -o "$tmp/t" bash -c "${cmds[$i]}"
        read -r secs kb user sys <"$tmp/t"
        cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{print u + s}')
        echo "$i $secs $kb $cpu" >>"$tmp/all"
        printf '  %-18s %7.2f s wall %7.2f s CPU %8.1f MiB\n' "${names[$i]}" "$secs" "$cpu" "$(awk -v k="$kb" 'BEGIN{print k/1024}')"
    done
done

echo
echo "== results: median of $reps, $size bytes, page cache warm, $(nproc) cores"
awk -v size="$size" -v names="$(printf '%s\n' "${names[@]}")" '
function median(arr, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
    return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
BEGIN { n = split(names, name, "\n") }
{ k = $1; c[k]++; t[k, c[k]] = $2; u[k, c[k]] = $4; if ($3 > rss[k]) rss[k] = $3
  if (c[k] == 1 || $2 < best[k]) best[k] = $2 }
END {
    for (k = 0; k < n; k++) {
        for (i = 1; i <= c[k]; i++) a[i] = t[k, i]
        med[k] = median(a, c[k]); if (med[k] <= 0) med[k] = 0.005
        if (best[k] <= 0) best[k] = 0.005
        for (i = 1; i <= c[k]; i++) a[i] = u[k, i]
        cpu[k] = median(a, c[k])
    }
    printf "%-18s %8s %8s %8s %8s %8s %11s %9s %11s %9s\n", "command", "wall s", "best s", "CPU s", "MB/s", "RSS MiB", "x baseline", "% of cat", "x (best)", "% (best)"
    for (k = 0; k < n; k++) {
        printf "%-18s %8.2f %8.2f %8.2f %8.0f %8.1f %11.1f %8.0f%% %11.1f %8.0f%%\n", name[k + 1], med[k], best[k], cpu[k], size / 1e6 / med[k], rss[k] / 1024, med[1] / med[k], 100 * med[0] / med[k], best[1] / best[k], 100 * best[0] / best[k]
    }
    printf "\n(wall and CPU: medians; best: the fastest round; CPU = user + system of all threads;\n RSS: the largest of the runs; x baseline and %% of cat: ratios of median wall times,\n (best): ratios of the fastest rounds, all from this run)\n"
    printf "\ntarget (gate-dist -j2), medians: >= 25x baseline: %.1fx %s; >= 30%% of cat: %.0f%% %s; RSS < 200 MiB: %.1f MiB %s\n",
        med[1] / med[3], (med[1] / med[3] >= 25 ? "met" : "NOT met"),
        100 * med[0] / med[3], (med[0] / med[3] >= 0.3 ? "met" : "NOT met"),
        rss[3] / 1024, (rss[3] / 1024 < 200 ? "met" : "NOT met")
    printf "target (gate-dist -j2), fastest rounds: >= 25x baseline: %.1fx %s; >= 30%% of cat: %.0f%% %s\n",
        best[1] / best[3], (best[1] / best[3] >= 25 ? "met" : "NOT met"),
        100 * best[0] / best[3], (best[0] / best[3] >= 0.3 ? "met" : "NOT met")
}' "$tmp/all"
