#!/usr/bin/env bash
# Whether two builds of gatecal write the same bytes: runs gate-dist and
# recommend of each build over every fixture (the demo, the samples and
# their vLLM logs and Prometheus responses, the variants, the edge cases,
# the traces) and a few simulator logs, in every format and with the flags
# that change what is computed, then compares stdout, stderr, the exit code
# and every file written (reports, SVGs, decision records, configs), byte
# for byte. For a refactoring that must not change behaviour.
#
#   bash bench/same-output.sh A B
#   bash bench/same-output.sh --capture DIR SPEC
#
# A, B and SPEC are each a git revision (built in a worktree of its own
# under $SAME_OUTPUT_CACHE, default target/same-output), `.` (the working
# tree as it is, built in its own target/), or, for A and B, a folder
# written by --capture (its outputs, and the simulator logs they were made
# from). Builds are debug builds (the suite runs in about two minutes).
# The git commit that `--version` and the Markdown summary name is written
# as COMMIT on both sides. Exits 0 when every output is the same, 1 when
# one differs (listing them, with the first lines of each difference), 2 on
# a usage or build error.
#
# Examples:
#   bash bench/same-output.sh --capture /tmp/base main   # before a refactoring
#   bash bench/same-output.sh /tmp/base .                # after each step
#   bash bench/same-output.sh main HEAD
set -uo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SAME_OUTPUT_CACHE:-$repo/target/same-output}"

die() { echo "bench/same-output.sh: $*" >&2; exit 2; }
usage() {
    sed -n '/^#   bash/p' "$0" | sed 's/^#  *//' >&2
    exit 2
}

# The binaries of SPEC (a revision or `.`), built; prints their folder.
build() {
    local spec=$1 src target
    if [[ $spec == . ]]; then
        src=$repo
        target="${CARGO_TARGET_DIR:-$repo/target}"
    else
        local rev
        rev=$(git -C "$repo" rev-parse --verify --quiet "$spec^{commit}") ||
            die "$spec is neither a folder written by --capture, \`.\`, nor a git revision"
        src=$cache/src
        target=$cache/target
        mkdir -p "$cache"
        if [[ ! -e $src/.git ]]; then
            git -C "$repo" worktree add --quiet --detach "$src" "$rev" >&2 ||
                die "git worktree add $src $rev failed"
        else
            git -C "$src" checkout --quiet --detach "$rev" >&2 ||
                die "checking out $rev in $src failed"
        fi
    fi
    echo "== building $spec ($(git -C "$src" rev-parse --short=9 HEAD)) in $target" >&2
    (cd "$src" && CARGO_TARGET_DIR=$target nice -n 10 cargo build --locked --quiet \
        -p gate-dist -p gatecal-recommend -p gatecal-sim >&2) || die "building $spec failed"
    echo "$target/debug"
}

# The simulator logs the suite reads, written into DIR by BIN's epp-sim.
simulate() {
    local bin=$1 dir=$2
    mkdir -p "$dir"
    (
        cd "$dir" || exit 2
        "$bin/epp-sim" --scenario glm-like --seed 3 --out glm.log &&
            "$bin/epp-sim" --scenario balanced --seed 5 --prefix --timestamps \
                --requests 800 --out balanced.log &&
            "$bin/epp-sim" --scenario eight-deployments --seed 4 --noise \
                --requests 1500 --out eight.log &&
            "$bin/epp-sim" --scenario pd-disagg --seed 2 --traces --requests 600 \
                --out pd.log &&
            "$bin/epp-sim" --scenario glm-like-v1 --seed 6 --producers-v5 \
                --duration 120 --out v5.log &&
            : >empty.log &&
            printf 'Measured peakPrefillThroughput = 3100 tokens/sec\nPEAK_PREFILL_THROUGHPUT=3100\n' \
                >calib.txt
    ) 2>"$dir/epp-sim.stderr" || die "epp-sim failed: $(cat "$dir/epp-sim.stderr")"
}

# One run: c NAME BIN ARGS... runs BIN with ARGS (%O in an argument is the
# run's own output folder), stdin from $STDIN (default /dev/null), and keeps
# stdout, stderr and the exit code beside the files it wrote.
c() {
    local name=$1 bin=$2 a
    shift 2
    local o=out/$name args=()
    mkdir -p "$o"
    for a in "$@"; do args+=("${a//%O/$o}"); done
    "$BIN/$bin" "${args[@]}" >"$o/stdout" 2>"$o/stderr" <"${STDIN:-/dev/null}"
    echo $? >"$o/rc"
}

# Every report format of one input set, plus the decisions written and
# read back: formats BIN NAME INPUTS...
formats() {
    local bin=$1 name=$2
    shift 2
    c "$name.table" "$bin" "$@" --format table
    c "$name.json" "$bin" "$@" --format json
    c "$name.csv" "$bin" "$@" --format csv
    if [[ $bin == gate-dist ]]; then
        c "$name.markdown" "$bin" "$@" -o %O/report.md --svg %O/gate.svg
    else
        c "$name.markdown" "$bin" "$@" -o %O/report.md
    fi
    c "$name.emit" "$bin" "$@" --format json --emit-decisions %O/decisions.jsonl
    c "$name.readback" "$bin" "out/$name.emit/decisions.jsonl" --format json
}

# The suite, run in the current folder (which holds `fixtures` and `sim`).
suite() {
    local f s v n
    # gate-dist: every input in every format.
    formats gate-dist gd.demo fixtures/demo/glm-like.log.gz
    for s in balanced eight-deployments glm-like glm-like-v1 latency-predictor pd-disagg; do
        formats gate-dist "gd.$s" "fixtures/$s/epp.log"
    done
    for v in fixtures/variants/*/; do
        v=${v%/}
        formats gate-dist "gd.variant.${v##*/}" "$v/epp.log"
    done
    for f in fixtures/edge/*.log fixtures/edge/decisions.jsonl; do
        n=${f##*/}
        formats gate-dist "gd.edge.${n%.*}" "$f"
    done
    for f in traces.jsonl traces.jaeger.json traces.tempo.json; do
        formats gate-dist "gd.traces.${f%.json*}" "fixtures/glm-like/$f"
    done
    formats gate-dist gd.logs-and-traces fixtures/glm-like/epp.log fixtures/glm-like/traces.jsonl
    for s in glm balanced eight pd v5; do
        formats gate-dist "gd.sim.$s" "sim/$s.log"
    done
    formats gate-dist gd.sim.pd-traces sim/pd.log sim/pd.traces.jsonl
    formats gate-dist gd.truth fixtures/demo/glm-like.truth.jsonl.gz

    # gate-dist: the flags that change what is computed or written.
    f=fixtures/glm-like/epp.log
    c gd.opt.window-csv gate-dist "$f" --window 5m --format csv
    c gd.opt.window-table gate-dist "$f" --window 10m --format table
    c gd.opt.window-md gate-dist "$f" --window 10m -o %O/report.md --svg %O/gate.svg
    c gd.opt.what-if-lists gate-dist "$f" --what-if-bar 500,3000,25000 \
        --what-if-peak 2000,9000 --format json
    c gd.opt.what-if gate-dist "$f" --what-if 'peakPrefillThroughput=3000,maxTTFTPenaltyMs=1500' \
        --what-if 'maxTTFTPenaltyMs=0,penaltyMode=matchedTokens' --format table
    c gd.opt.what-if-json gate-dist "$f" --what-if 'peakPrefillThroughput=3000,maxTTFTPenaltyMs=1500' \
        --what-if 'affinityThreshold=0.5,maxInFlightRequestsDelta=4' --format json
    c gd.opt.overrides gate-dist "$f" --max-ttft-penalty-ms 5000 \
        --peak-prefill-throughput 3000 --affinity-threshold 0.9 --format json
    c gd.opt.matched-tokens gate-dist "$f" --penalty-mode matchedTokens --format json
    c gd.opt.legacy gate-dist "$f" --legacy-missing-signal --format json
    c gd.opt.range gate-dist "$f" --since 2026-08-21T14:27:00Z --until 2026-08-21T14:29:00Z \
        --format json
    c gd.opt.range-table gate-dist "$f" --since 2026-08-21T14:27:00Z --format table
    c gd.opt.staleness gate-dist "$f" --max-staleness 5s --pinned-worse-min 2000 --format json
    c gd.opt.bins gate-dist "$f" --bins 10 --svg-scale log -o %O/report.md --svg %O/gate.svg
    c gd.opt.bins-json gate-dist "$f" --bins 7 --format json
    c gd.opt.wide gate-dist "$f" --wide --format table
    c gd.opt.j1 gate-dist "$f" -j1 --format json
    c gd.opt.named gate-dist prod=fixtures/glm-like/epp.log staging=fixtures/balanced/epp.log \
        --format table
    c gd.opt.named-md gate-dist prod=fixtures/glm-like/epp.log staging=fixtures/balanced/epp.log \
        -o %O/report.md --svg %O/gate.svg
    c gd.opt.list gate-dist fixtures/eight-deployments/epp.log --list-deployments
    c gd.opt.list-all gate-dist fixtures/ --list-deployments
    c gd.opt.folder gate-dist fixtures/ --format json
    c gd.opt.config gate-dist fixtures/edge/two_filter_instances.log \
        --config fixtures/edge/two_filter_instances.yaml --format json
    c gd.opt.config-table gate-dist fixtures/edge/two_filter_instances.log \
        --config fixtures/edge/two_filter_instances.yaml --format table
    c gd.opt.candidate gate-dist fixtures/edge/two_filter_instances.log \
        --candidate-config fixtures/edge/two_filter_instances.yaml --format json
    c gd.opt.block-size gate-dist fixtures/edge/producers_v5.log \
        --prefix-block-size approximate=32,precise=8 --format json
    c gd.opt.v5-matched gate-dist sim/v5.log --penalty-mode matchedTokens --format table
    c gd.opt.input-format gate-dist fixtures/edge/decisions.jsonl --input-format decisions --format json
    c gd.opt.strict gate-dist fixtures/edge/truncated_last_line.log --strict --format json
    c gd.opt.empty gate-dist sim/empty.log --format json
    c gd.opt.missing gate-dist sim/no-such-file.log --format json
    c gd.opt.bad-flag gate-dist "$f" --bins 1
    c gd.opt.emit-stdout gate-dist "$f" --emit-decisions - -o %O/report.json
    c gd.opt.version gate-dist --version
    STDIN=fixtures/glm-like/epp.log c gd.opt.stdin gate-dist - --format json

    # recommend: every input with the vLLM logs and Prometheus responses it carries.
    formats recommend rc.demo fixtures/demo/glm-like.log.gz fixtures/demo/glm-like.vllm
    for s in balanced eight-deployments glm-like glm-like-v1 latency-predictor pd-disagg; do
        formats recommend "rc.$s" "fixtures/$s/epp.log" "fixtures/$s/vllm" "fixtures/$s/prometheus"
        c "rc.$s.vllm-only" recommend "fixtures/$s/epp.log" "fixtures/$s/vllm" --format json
        # The decision records carry matched tokens: the whole recommendation.
        formats recommend "rc.$s.records" "fixtures/$s/truth.jsonl" "fixtures/$s/vllm" \
            "fixtures/$s/prometheus"
    done
    for s in balanced glm-like glm-like-v1 latency-predictor pd-disagg; do
        c "rc.$s.emit-config" recommend "fixtures/$s/truth.jsonl" "fixtures/$s/vllm" \
            --format json --emit-config %O/epp-config.yaml
    done
    c rc.eight-deployments.emit-config recommend fixtures/eight-deployments/truth.jsonl \
        fixtures/eight-deployments/vllm --format table \
        --emit-config glm-5-2=%O/epp-config.yaml
    c rc.eight-deployments.emit-config-refused recommend fixtures/eight-deployments/truth.jsonl \
        fixtures/eight-deployments/vllm --format table \
        --emit-config glm-5-2=%O/epp-config.yaml --emit-config qwen3-32b=%O/qwen.yaml
    for v in fixtures/variants/*/; do
        v=${v%/}
        c "rc.variant.${v##*/}.json" recommend "$v/epp.log" --format json
        c "rc.variant.${v##*/}.table" recommend "$v/epp.log" --format table
    done
    for f in fixtures/edge/*.log fixtures/edge/decisions.jsonl; do
        n=${f##*/}
        c "rc.edge.${n%.*}.json" recommend "$f" --format json
        c "rc.edge.${n%.*}.table" recommend "$f" --format table
    done
    for s in glm balanced eight pd v5; do
        formats recommend "rc.sim.$s" "sim/$s.log" "sim/$s.vllm" "sim/$s.prometheus"
        formats recommend "rc.sim.$s.records" "sim/$s.truth.jsonl" "sim/$s.vllm"
    done
    formats recommend rc.truth fixtures/demo/glm-like.truth.jsonl.gz

    # recommend: its own flags.
    f=fixtures/glm-like/epp.log
    c rc.opt.calibration recommend fixtures/demo/glm-like.truth.jsonl.gz \
        --calibration sim/calib.txt --format table
    c rc.opt.calibration-json recommend fixtures/demo/glm-like.truth.jsonl.gz \
        --calibration sim/calib.txt --format json
    c rc.opt.peak recommend "$f" fixtures/glm-like/vllm --peak-prefill-throughput 3000 --format json
    c rc.opt.current-peak recommend "$f" fixtures/glm-like/vllm \
        --current-peak-prefill-throughput 9000 --format table
    c rc.opt.overrides recommend "$f" fixtures/glm-like/vllm --max-ttft-penalty-ms 5000 \
        --penalty-mode matchedTokens --format json
    c rc.opt.window recommend "$f" fixtures/glm-like/vllm --window 10m --format json
    c rc.opt.window-table recommend "$f" fixtures/glm-like/vllm --window 10m --format table
    c rc.opt.range recommend "$f" fixtures/glm-like/vllm --since 2026-08-21T14:27:00Z --format json
    c rc.opt.what-if recommend "$f" fixtures/glm-like/vllm \
        --what-if 'peakPrefillThroughput=3000,maxTTFTPenaltyMs=1500' --format table
    c rc.opt.candidate recommend "$f" fixtures/glm-like/vllm \
        --candidate-config out/rc.glm-like.emit-config/epp-config.yaml --format json
    c rc.opt.config recommend fixtures/edge/two_filter_instances.log \
        --config fixtures/edge/two_filter_instances.yaml --format json
    c rc.opt.emit-config-named recommend fixtures/edge/two_filter_instances.log \
        --config fixtures/edge/two_filter_instances.yaml --emit-config %O/out.yaml --format table
    c rc.opt.block-size recommend sim/v5.log sim/v5.vllm \
        --prefix-block-size approximate=32,precise=8 --format json
    c rc.opt.year recommend fixtures/edge/vllm_stats.log --year 2025 --format json
    c rc.opt.list recommend fixtures/eight-deployments/epp.log fixtures/eight-deployments/vllm \
        --list-deployments
    c rc.opt.named recommend prod=fixtures/glm-like/epp.log staging=fixtures/balanced/epp.log \
        --format markdown
    c rc.opt.strict recommend fixtures/edge/truncated_last_line.log --strict --format json
    c rc.opt.empty recommend sim/empty.log --format json
    c rc.opt.missing recommend sim/no-such-file.log
    c rc.opt.version recommend --version

    # gate-dist reading the configs recommend wrote.
    for s in balanced glm-like glm-like-v1 eight-deployments; do
        c "gd.candidate.$s" gate-dist "fixtures/$s/epp.log" \
            --candidate-config "out/rc.$s.emit-config/epp-config.yaml" --format json
        c "gd.config.$s" gate-dist "fixtures/$s/epp.log" \
            --config "out/rc.$s.emit-config/epp-config.yaml" --format table
    done
}

# Runs the suite with the binaries in BIN over the simulator logs in SIM;
# the outputs go to DEST.
run_suite() {
    local bin=$1 sim=$2 dest=$3 run commit
    run=$(mktemp -d "${TMPDIR:-/tmp}/same-output-run.XXXXXX")
    ln -s "$repo/fixtures" "$run/fixtures"
    ln -s "$sim" "$run/sim"
    echo "== running the suite with $bin" >&2
    (
        cd "$run" || exit 2
        export NO_COLOR=1 LC_ALL=C TZ=UTC
        unset COLUMNS
        BIN=$bin
        suite
        (cd fixtures && find . -type f | LC_ALL=C sort | xargs sha256sum) >out/fixtures.sha256
    )
    commit=$("$bin/gate-dist" --version | sed -n 's/.*(\([0-9a-f]*\))$/\1/p')
    if [[ -n $commit ]]; then
        grep -rlF "$commit" "$run/out" | xargs -r sed -i "s/$commit/COMMIT/g"
    fi
    mkdir -p "$dest"
    rm -rf "$dest/out"
    mv "$run/out" "$dest/out"
    rm -rf "$run"
    echo "== $(find "$dest/out" -name rc | wc -l) runs" >&2
}

# A side of the comparison: prints the folder of its outputs (under WORK),
# running the suite for a build; SIM is the simulator logs to use.
side() {
    local spec=$1 label=$2 sim=$3 bin
    if [[ -d $spec && -e $spec/same-output.capture ]]; then
        echo "$(cd "$spec" && pwd)"
        return
    fi
    bin=$(build "$spec") || exit 2
    [[ -e $sim/glm.log ]] || simulate "$bin" "$sim"
    run_suite "$bin" "$sim" "$work/$label"
    echo "$work/$label"
}

[[ $# -eq 3 && $1 == --capture ]] || [[ $# -eq 2 && $1 != --capture ]] || usage
command -v cargo >/dev/null || die "cargo is needed"

if [[ $1 == --capture ]]; then
    dest=$2
    spec=$3
    [[ -e $dest && ! -e $dest/same-output.capture ]] &&
        die "$dest exists and was not written by --capture"
    bin=$(build "$spec") || exit 2
    mkdir -p "$dest" || die "cannot make $dest"
    dest=$(cd "$dest" && pwd)
    rm -rf "$dest/sim"
    simulate "$bin" "$dest/sim"
    run_suite "$bin" "$dest/sim" "$dest"
    {
        echo "spec: $spec"
        echo "commit: $(cd "$repo" && if [[ $spec == . ]]; then git rev-parse HEAD; else git rev-parse "$spec^{commit}"; fi)"
    } >"$dest/same-output.capture"
    echo "== captured into $dest" >&2
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/same-output.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The simulator logs: a captured side's own, else written by the first build.
sim=$work/sim
for s in "$1" "$2"; do
    if [[ -d $s && -e $s/same-output.capture ]]; then
        sim=$(cd "$s" && pwd)/sim
        break
    fi
done
a=$(side "$1" a "$sim") || exit 2
b=$(side "$2" b "$sim") || exit 2

runs=$(find "$a/out" -name rc | wc -l)
if diff -rq "$a/out" "$b/out" >"$work/diffs"; then
    echo "same output: $runs runs of $1 and $2 (stdout, stderr, exit codes, files written) are byte-identical"
    exit 0
fi
echo "different output between $1 and $2 in $(wc -l <"$work/diffs") place(s) of $runs runs:"
while read -r line; do
    echo "  $line"
done <"$work/diffs"
grep '^Files ' "$work/diffs" | head -5 | while read -r _ x _ y _; do
    echo "--- $x"
    diff "$x" "$y" | head -10
done
exit 1
