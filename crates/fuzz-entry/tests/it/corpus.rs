//! Every fuzz target's entry point on stable Rust: over its seeds
//! (`fuzz/seeds/<target>/` and seeds built here from the fixtures) and a
//! few thousand deterministic mutations of them (bit flips, bytes set to
//! delimiters, dictionary tokens inserted, ranges deleted or repeated,
//! splices of two seeds, truncations). A panic, a broken invariant, or an
//! input that grows without bound (the alias bombs among the `config`
//! seeds) fails the test; `docs/fuzzing.md` has the longer `cargo fuzz`
//! runs.

use std::path::{Path, PathBuf};

use gatecal_analysis::EppConfigError;
use gatecal_fuzz_entry::{SEED_LOGS, seed_lines};

/// A small deterministic generator (xorshift64*): the same inputs on
/// every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes a mutation sets: the delimiters of JSON lines and YAML.
const DELIMITERS: &[u8] = b"{}[]\":,\n -&*|>#'\\\t\r\x00\xff0";

/// `seed` mutated by one to four edits, cut at `max` bytes.
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], dict: &[Vec<u8>], max: usize) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = DELIMITERS[rng.below(DELIMITERS.len())];
            }
            2 if !dict.is_empty() => {
                let t = &dict[rng.below(dict.len())];
                v.splice(at..at, t.iter().copied());
            }
            3 => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            4 => {
                let end = (at + 1 + rng.below(64)).min(v.len());
                let part = v[at.min(end)..end].to_vec();
                let to = rng.below(v.len() + 1);
                for _ in 0..1 + rng.below(3) {
                    v.splice(to..to, part.iter().copied());
                }
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
            _ => v.truncate(at),
        }
    }
    v.truncate(max);
    v
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed seeds of a target (`fuzz/seeds/<target>/`), by name.
fn committed(target: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(dir) = std::fs::read_dir(root().join("fuzz/seeds").join(target)) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<u8>)> = dir
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// The tokens of `fuzz/dict/log.dict` (libFuzzer's format: one quoted
/// token a line).
fn log_dict() -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(root().join("fuzz/dict/log.dict")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.strip_suffix('"'))
        .map(|t| t.replace("\\\"", "\"").replace("\\\\", "\\").into_bytes())
        .collect()
}

/// YAML's structure and the config's keys.
const YAML_DICT: &[&str] = &[
    "&a ",
    "*a",
    "&b ",
    "*b",
    "<<: *a\n",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "\n- ",
    "\n  ",
    "|\n",
    ">-\n",
    "---\n",
    "...\n",
    "!!str ",
    "\"",
    "'",
    "# c\n",
    "plugins:\n",
    "- type: prefix-cache-affinity-filter\n",
    "parameters:",
    "maxTTFTPenaltyMs: ",
    "peakPrefillThroughput: ",
    "penaltyMode: matchedTokens",
    "ttftSource: latencyPredictor",
    ".nan",
    "-.inf",
    "1e400",
    "0x1F",
    "{{ .Values.x }}",
    "data:\n  config.yaml: |\n    ",
];

/// Runs `entry` on every seed and on `n` mutants of them of at most `max`
/// bytes (the targets' costs differ: the sizes keep the test quick).
fn run(
    target: &str,
    seeds: &[Vec<u8>],
    dict: &[Vec<u8>],
    (n, max): (usize, usize),
    entry: impl Fn(&[u8]),
) {
    assert!(!seeds.is_empty(), "{target}: no seeds");
    for s in seeds {
        entry(s);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    for _ in 0..n {
        entry(&mutate(&mut rng, seeds, dict, max));
    }
}

#[test]
fn line() {
    let mut seeds: Vec<Vec<u8>> = seed_lines().into_iter().map(<[u8]>::to_vec).collect();
    seeds.extend(committed("line").into_iter().map(|(_, b)| b));
    run(
        "line",
        &seeds,
        &log_dict(),
        (3000, 4096),
        gatecal_fuzz_entry::line,
    );
}

#[test]
fn assembler() {
    // Any bytes are a program over the fixture lines: short slices of the
    // logs, as `fuzz/seed.sh` writes them (mutants of 96 bytes: about 24
    // lines).
    let mut seeds: Vec<Vec<u8>> = SEED_LOGS
        .iter()
        .map(|l| l[..l.len().min(512)].to_vec())
        .collect();
    seeds.extend(committed("assembler").into_iter().map(|(_, b)| b));
    run(
        "assembler",
        &seeds,
        &[],
        (2000, 96),
        gatecal_fuzz_entry::assembler,
    );
}

#[test]
fn pipeline() {
    // The whole fixture logs once; mutants of their first 2 KiB (a few
    // requests' lines), fewer than for the other targets: each runs two
    // parses, both analyses and every renderer (about 20 ms unoptimised).
    for s in SEED_LOGS {
        gatecal_fuzz_entry::pipeline(s);
    }
    let mut seeds: Vec<Vec<u8>> = SEED_LOGS
        .iter()
        .map(|l| l[..l.len().min(2048)].to_vec())
        .collect();
    seeds.extend(committed("pipeline").into_iter().map(|(_, b)| b));
    run(
        "pipeline",
        &seeds,
        &log_dict(),
        (400, 2048),
        gatecal_fuzz_entry::pipeline,
    );
}

#[test]
fn decisions() {
    let records = std::fs::read(root().join("fixtures/edge/decisions.jsonl")).unwrap();
    let mut seeds: Vec<Vec<u8>> = records
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    seeds.push(records);
    seeds.extend(committed("decisions").into_iter().map(|(_, b)| b));
    run(
        "decisions",
        &seeds,
        &log_dict(),
        (2000, 4096),
        gatecal_fuzz_entry::decisions,
    );
}

/// The config reader, seeded with real shapes and hostile files: the
/// alias bombs (a few hundred bytes that stand for billions of nodes) and
/// the deep nestings among the committed seeds must each be refused by
/// their bound, and their mutants read (or refused) like any input.
#[test]
fn config() {
    let committed = committed("config");
    let mut seeds: Vec<Vec<u8>> = committed.iter().map(|(_, b)| b.clone()).collect();
    seeds.push(std::fs::read(root().join("fixtures/edge/two_filter_instances.yaml")).unwrap());
    // Many documents, and a list far over the flow bound: refused, and too
    // big to mutate quickly.
    for (big, want) in [
        (
            "---\nplugins: []\n".repeat(1001),
            EppConfigError::TooManyDocuments,
        ),
        (
            format!("plugins: [{}]\n", "a,".repeat(100_001)),
            EppConfigError::TooManyFlowItems,
        ),
    ] {
        assert_eq!(gatecal_fuzz_entry::config(big.as_bytes()), Some(Err(want)));
    }
    let mut bombs = 0;
    for (name, bytes) in &committed {
        let got = gatecal_fuzz_entry::config(bytes);
        let want = if name.starts_with("alias_bomb") {
            EppConfigError::TooManyNodes
        } else if name.starts_with("deep_") {
            EppConfigError::TooDeep
        } else {
            continue;
        };
        assert_eq!(got, Some(Err(want)), "{name}");
        bombs += 1;
    }
    assert!(bombs >= 6, "the hostile seeds are in fuzz/seeds/config");
    let dict: Vec<Vec<u8>> = YAML_DICT.iter().map(|t| t.as_bytes().to_vec()).collect();
    run("config", &seeds, &dict, (3000, 8192), |b| {
        gatecal_fuzz_entry::config(b);
    });
}
