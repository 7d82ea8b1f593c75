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
    cargo clippy --workspace --all-targets --locked -- -D warnings

[doc('Format the code.')]
fmt:
    cargo fmt --all

[doc('Check formatting.')]
fmt-check:
    cargo fmt --all --check

[doc('Build the docs, warnings denied.')]
doc:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

[doc('Regenerate the committed fixtures from the simulator.')]
fixtures:
    cargo run --release --locked -p gatecal-sim --bin epp-sim -- gen-fixtures fixtures

[doc('Benchmarks: criterion parser bench, then the side-by-side run against the Python baseline.')]
bench:
    cargo bench --workspace --locked
    bash bench/side_by_side.sh

[doc('Everything CI checks.')]
ci:
    bash .ci/run
