# gatecal recipes; `just ci` runs what .ci/run runs.

default:
    @just --list

[doc('Build everything (release).')]
build:
    cargo build --workspace --release --locked

[doc('Run every test (the README test command).')]
test:
    cargo test --workspace --locked

[doc('Clippy over all targets, warnings denied.')]
lint:
    cargo clippy --workspace --all-targets --locked --features gatecal-parser/bench,gatecal-analysis/bench -- -D warnings

[doc('Format the code.')]
fmt:
    cargo fmt --all

[doc('Check formatting.')]
fmt-check:
    cargo fmt --all --check

[doc('Build the docs, warnings denied.')]
doc:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

[doc('Regenerate the committed fixtures from the simulator (samples, variants, and the README demo).')]
fixtures:
    cargo run --release --locked -p gatecal-sim --bin epp-sim -- gen-fixtures fixtures
    rm -rf fixtures/demo && mkdir -p fixtures/demo
    cargo run --release --locked -p gatecal-sim --bin epp-sim -- --scenario glm-like --seed 2 --out fixtures/demo/glm-like.log
    gzip -n -9 -f fixtures/demo/glm-like.log fixtures/demo/glm-like.truth.jsonl

[doc('The README main job: gate-dist on the bundled demo.')]
demo:
    cargo run --release --locked -p gate-dist -- fixtures/demo/glm-like.log.gz --format table

[doc('The accuracy checks alone (what .ci/run runs after the tests): every bound of the accuracy sweeps, gate-dist against the simulator truth per scenario and the peak estimator across seeds 1-4, optimised (the `accuracy` profile).')]
accuracy-check:
    nice cargo test --profile accuracy --locked -p gate-dist -p gatecal-recommend --test it -- --ignored accuracy:: peak_sweep::

[doc('The accuracy checks, then predicted TTFT against the simulator on held-out seeds (5-8; 1-4 calibrate the interval), every scenario and the Mooncake trace when GATECAL_MOONCAKE_TRACE (default ../shared/workloads/mooncake-synthetic.jsonl) exists; docs/methodology.md section 8.')]
accuracy *ARGS: accuracy-check
    GATECAL_MOONCAKE_TRACE="${GATECAL_MOONCAKE_TRACE:-../shared/workloads/mooncake-synthetic.jsonl}" nice -n 19 cargo run --release --locked -p gatecal-analysis --example accuracy -- {{ARGS}}

[doc('Benchmarks: the criterion benches (parser, replay, merging 1,000 partial reports), then the side-by-side run against the Python baseline.')]
bench:
    cargo bench --workspace --locked --features gatecal-parser/bench,gatecal-analysis/bench
    bash bench/side_by_side.sh

[doc('Peak RSS on the memory-bound cases (multi-GB logs under /tmp, deleted after; docs/performance.md).')]
memory:
    bash bench/memory.sh

[doc('Everything CI checks.')]
ci:
    bash .ci/run

[doc('Seed fuzz/corpus/TARGET/ for every fuzz target from the fixtures.')]
fuzz-seed:
    bash fuzz/seed.sh

[doc('Run one fuzz target (line, assembler, pipeline, decisions, config) for SECONDS; needs nightly and cargo-fuzz (docs/fuzzing.md).')]
fuzz TARGET SECONDS='600':
    cd fuzz && nice -n 15 cargo +nightly fuzz run {{TARGET}} corpus/{{TARGET}} -- -max_total_time={{SECONDS}} -dict=dict/log.dict -print_final_stats=1
