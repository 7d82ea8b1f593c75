#!/usr/bin/env bash
# Reading speed against `cat`, paired: gate-dist (and recommend, on the
# same EPP logs plus their vLLM logs) against `cat FILES >/dev/null` in one
# run, each command once per round, in a rotating order, for REPS rounds;
# prints each command's median wall time, MB/s, largest peak RSS, and the
# median over rounds of `cat`'s wall time divided by the command's (its
# share of `cat`'s throughput, measured against the `cat` of its own round).
#
#   bash bench/cat_ratio.sh [REPS] [BIN_DIR ...]
#
# BIN_DIR: folders holding `gate-dist` and `recommend` (default: the
# release build, target/release, built first); give two to compare two
# builds (`/tmp/old target/release`). REPS defaults to 9.
#
# The log set (bench-data/set/, git-ignored, written by the release
# `epp-sim` when missing): one log of each scenario family, about 1 GB
# together, `-v=4` with the endpoint dumps, three plain and three framed
# as `kubectl logs --prefix --timestamps`, each with its vLLM logs.
#
# Environment:
#   CAT_RATIO_THREADS  -j of gate-dist and recommend (default 2)
#   CAT_RATIO_ONLY     `gate-dist` or `recommend` to time only that one
#   CARGO_TARGET_DIR   honoured (default target/)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
set_dir="$root/bench-data/set"
threads="${CAT_RATIO_THREADS:-2}"
only="${CAT_RATIO_ONLY:-}"
timer=/usr/bin/time
reps="${1:-9}"
shift || true
bins=("$@")

[[ -x $timer ]] || { echo "bench/cat_ratio.sh: $timer (GNU time) is needed" >&2; exit 2; }
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/cat_ratio.sh [REPS] [BIN_DIR ...]" >&2; exit 2; }

cd "$root"
if [[ ${#bins[@]} -eq 0 ]]; then
    echo "== building (release)" >&2
    nice cargo build --release --locked -p gate-dist -p gatecal-recommend -p gatecal-sim \
        --bin gate-dist --bin recommend --bin epp-sim >&2
    bins=("$target/release")
fi

# scenario, requests, framing flags: about 165 MB each.
logs=(
    "glm-like 14000"
    "balanced 9000 --prefix --timestamps"
    "eight-deployments 31500"
    "pd-disagg 7500 --prefix --timestamps"
    "latency-predictor 8900"
    "peak-sweep 11400 --prefix --timestamps"
)
files=()
vllm=()
for spec in "${logs[@]}"; do
    read -r scenario requests flags <<<"$spec"
    f="$set_dir/$scenario.log"
    if [[ ! -s $f ]]; then
        # Builds given: only the simulator is built, when it is missing.
        if [[ ! -x $target/release/epp-sim ]]; then
            echo "== building epp-sim (release)" >&2
            nice cargo build --release --locked -p gatecal-sim --bin epp-sim >&2
        fi
        echo "== writing $f" >&2
        mkdir -p "$set_dir"
        # shellcheck disable=SC2086
        "$target/release/epp-sim" --scenario "$scenario" --seed 1 --full-dumps \
            --requests "$requests" $flags --out "$f" >/dev/null
    fi
    files+=("$f")
    vllm+=("$set_dir/$scenario.vllm")
done
size=$(find "${files[@]}" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
vsize=$(find "${files[@]}" "${vllm[@]}" -type f -printf '%s\n' | awk '{s += $1} END {print s}')

names=("cat EPP logs")
cmds=("cat ${files[*]}")
sizes=("$size")
for b in "${bins[@]}"; do
    if [[ $only != recommend ]]; then
        names+=("$b/gate-dist -j$threads")
        cmds+=("$b/gate-dist -j$threads --format json --quiet ${files[*]}")
        sizes+=("$size")
    fi
done
if [[ $only != gate-dist ]]; then
    names+=("cat EPP + vLLM logs")
    cmds+=("cat ${files[*]} ${vllm[*]/%//*}")
    sizes+=("$vsize")
    for b in "${bins[@]}"; do
        names+=("$b/recommend -j$threads")
        cmds+=("$b/recommend -j$threads --format json --quiet ${files[*]} ${vllm[*]}")
        sizes+=("$vsize")
    done
fi

echo "== $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); EPP logs $size bytes, with vLLM logs $vsize bytes"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
n=${#cmds[@]}
find "${files[@]}" "${vllm[@]}" -type f -exec cat {} + >/dev/null
for ((r = 0; r < reps; r++)); do
    for ((k = 0; k < n; k++)); do
        i=$(((k + r) % n))
        # shellcheck disable=SC2086
        "$timer" -f '%e %M' -o "$tmp/t" ${cmds[$i]} >/dev/null 2>"$tmp/err" ||
            { echo "failed: ${cmds[$i]}" >&2; cat "$tmp/err" >&2; exit 1; }
        echo "$r $i $(cat "$tmp/t")" >>"$tmp/all"
    done
    echo "   round $((r + 1))/$reps done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

printf '%s\n' "${names[@]}" >"$tmp/names"
printf '%s\n' "${sizes[@]}" >"$tmp/sizes"
awk -v reps="$reps" '
function median(arr, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
    return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
FILENAME == ARGV[1] { name[FNR - 1] = $0; n = FNR; next }
FILENAME == ARGV[2] { size[FNR - 1] = $0; next }
{ t[$1, $2] = ($3 > 0 ? $3 : 0.005); if ($4 > rss[$2]) rss[$2] = $4 }
END {
    printf "%-52s %8s %8s %9s %10s\n", "command", "wall s", "MB/s", "RSS MiB", "% of cat"
    for (i = 0; i < n; i++) {
        # The cat of the same input: the last cat row at or before this one.
        if (name[i] ~ /^cat /) c = i
        for (r = 0; r < reps; r++) { a[r + 1] = t[r, i]; q[r + 1] = t[r, c] / t[r, i] }
        m = median(a, reps)
        printf "%-52s %8.3f %8.0f %9.1f %9.1f%%\n", name[i], m, size[i] / 1e6 / m, rss[i] / 1024, 100 * median(q, reps)
    }
    printf "\n(medians of %d interleaved rounds; %% of cat: the median over rounds of the\n round'\''s cat wall time over the command'\''s, the page cache warm)\n", reps
}' "$tmp/names" "$tmp/sizes" "$tmp/all"
