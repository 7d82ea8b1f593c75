//! The keys the parser reads: their spellings and the collision-free
//! table, built at compile time, that finds a key from its spelling.

macro_rules! keys {
    ($($var:ident = $lit:literal,)*) => {
        /// A key the parser reads.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub(crate) enum Key { $($var,)* }

        /// Number of keys.
        pub(crate) const NKEYS: usize = [$(Key::$var,)*].len();

        /// Every key, in declaration order (`ALL[k as usize] == k`).
        const ALL: [Key; NKEYS] = [$(Key::$var,)*];

        /// The spelling of every key, in declaration order.
        const NAMES: [&[u8]; NKEYS] = [$($lit,)*];

        /// The spelling of every key as text, in declaration order.
        const TEXTS: [&str; NKEYS] = [$(text($lit),)*];

        impl Key {
            /// The key spelled `b`: one hash-table probe and one comparison
            /// (most keys of a line are not read, and this runs for every
            /// member of every used line).
            #[inline(always)]
            pub(crate) fn of(b: &[u8]) -> Option<Key> {
                // No key is shorter ([`build`] checks): [`hashed`] then
                // reads its bytes with no test of the length.
                if b.len() < MIN_LEN {
                    return None;
                }
                let t = &KEY_TABLE;
                let k = t.slots[slot(b, t.seed)];
                if k == u8::MAX {
                    return None;
                }
                let k = usize::from(k);
                short_eq(NAMES[k], b).then(|| ALL[k])
            }

            /// The key's spelling.
            pub(crate) fn name(self) -> &'static str {
                TEXTS[self as usize]
            }
        }
    };
}

keys! {
    Level = b"level",
    Ts = b"ts",
    Msg = b"msg",
    RequestId = b"x-request-id",
    TargetModelName = b"targetModelName",
    ResolvedTargetModel = b"resolvedTargetModel",
    Model = b"model",
    Plugin = b"plugin",
    Profile = b"profile",
    Endpoint = b"endpoint",
    Endpoints = b"endpoints",
    Score = b"score",
    TokenLoad = b"tokenLoad",
    AffinityThreshold = b"affinityThreshold",
    Tau = b"tau",
    Total = b"total",
    Sticky = b"sticky",
    BestStickyTtft = b"bestStickyTTFT",
    BestNonStickyTtft = b"bestNonStickyTTFT",
    Penalty = b"penalty",
    MaxPenalty = b"maxPenalty",
    PrefillThroughput = b"prefillThroughput",
    StickyObserved = b"stickyObserved",
    NonStickyObserved = b"nonStickyObserved",
    BestStickyTokens = b"bestStickyTokens",
    BestNonStickyTokens = b"bestNonStickyTokens",
    StickyRequests = b"stickyRequests",
    NonStickyRequests = b"nonStickyRequests",
    MaxDelta = b"maxDelta",
    StickyRequestTtft = b"stickyRequestTTFT",
    NonStickyRequestTtft = b"nonStickyRequestTTFT",
    Added = b"added",
    MinCachedTokensFraction = b"minCachedTokensFraction",
    MinCachedTokens = b"minCachedTokens",
    Throughput = b"throughput",
    InFlightTokens = b"inFlightTokens",
    StickyCost = b"stickyCost",
    NonStickyCost = b"nonStickyCost",
    RemainingTurns = b"remainingTurns",
    PenaltySource = b"penaltySource",
    PeakPrefillThroughput = b"peakPrefillThroughput",
    Source = b"source",
    Reason = b"reason",
    RemainingEndpoints = b"remainingEndpoints",
    HitPrefixTokens = b"absolute hit prefix len (tokens)",
    PromptLength = b"prompt length (token)",
    TotalBlocks = b"total # blocks",
    BlockKeys = b"blockKeys",
    Scores = b"scores",
    Result = b"result",
    ResponseBytes = b"len(responseBytes)",
    EndOfStream = b"endOfStream",
}

/// A key's spelling as text (checked at compile time).
const fn text(b: &'static [u8]) -> &'static str {
    match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(_) => panic!("a key spelling is not UTF-8"),
    }
}

/// `a == b` without a call to `memcmp` for the lengths of most keys
/// (up to 16 bytes: two overlapping 8-byte words, or bytes).
#[inline(always)]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    match n {
        0..8 => a.iter().zip(b).all(|(x, y)| x == y),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// The shortest key spelling (bytes); [`Key::of`] finds no key for a
/// shorter one.
const MIN_LEN: usize = 2;

/// Slots of the key table (a power of two, several times [`NKEYS`]).
const SLOTS: usize = 512;

/// Seeds [`build`] tries before it gives up.
const MAX_SEEDS: u32 = 1 << 12;

/// A collision-free table of the keys: `slots[slot(name, seed)]` is the
/// index of the key spelled `name`, `u8::MAX` for an empty slot.
struct KeyTable {
    seed: u64,
    slots: [u8; SLOTS],
}

/// What [`slot`] reads of a key spelling: its length and its first,
/// second, middle and last bytes, each in its own bits (two spellings give
/// the same value exactly when all of those are the same).
#[inline(always)]
const fn hashed(b: &[u8]) -> u64 {
    let n = b.len();
    let first = if n > 0 { b[0] } else { 0 };
    let second = if n > 1 { b[1] } else { 0 };
    let middle = if n > 0 { b[n / 2] } else { 0 };
    let last = if n > 0 { b[n - 1] } else { 0 };
    (first as u64)
        | ((second as u64) << 8)
        | ((middle as u64) << 16)
        | ((last as u64) << 24)
        | ((n as u64) << 32)
}

/// The slot of a key spelling: [`hashed`] times `seed`, its top bits.
#[inline(always)]
const fn slot(b: &[u8], seed: u64) -> usize {
    (hashed(b).wrapping_mul(seed) >> (64 - SLOTS.trailing_zeros())) as usize
}

/// Why no key table could be built from a list of spellings.
#[derive(Debug, PartialEq, Eq)]
enum Unbuildable {
    /// More keys than a slot can index (`u8::MAX` marks an empty slot).
    TooMany,
    /// The key at this index is shorter than [`MIN_LEN`].
    TooShort(usize),
    /// The keys at these two indices look the same to [`hashed`]: no seed
    /// can give them different slots.
    Indistinct(usize, usize),
    /// No seed among the first [`MAX_SEEDS`] gives every key its own slot.
    NoSeed,
}

/// The key table of `names`: the first seed (odd multiplier) of a fixed
/// sequence that gives every key its own slot. Bounded: when it cannot
/// succeed (two keys [`hashed`] alike) it says so at once, and it tries
/// [`MAX_SEEDS`] seeds at most.
const fn build(names: &[&[u8]]) -> Result<KeyTable, Unbuildable> {
    if names.len() >= u8::MAX as usize {
        return Err(Unbuildable::TooMany);
    }
    let mut i = 0;
    while i < names.len() {
        if names[i].len() < MIN_LEN {
            return Err(Unbuildable::TooShort(i));
        }
        let mut j = i + 1;
        while j < names.len() {
            if hashed(names[i]) == hashed(names[j]) {
                return Err(Unbuildable::Indistinct(i, j));
            }
            j += 1;
        }
        i += 1;
    }
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut tries = 0;
    while tries < MAX_SEEDS {
        let mut slots = [u8::MAX; SLOTS];
        let mut i = 0;
        let mut free = true;
        while i < names.len() {
            let s = slot(names[i], seed);
            if slots[s] != u8::MAX {
                free = false;
                break;
            }
            slots[s] = i as u8;
            i += 1;
        }
        if free {
            return Ok(KeyTable { seed, slots });
        }
        seed = seed.wrapping_add(0x6A09_E667_F3BC_C908) | 1;
        tries += 1;
    }
    Err(Unbuildable::NoSeed)
}

/// A message built at compile time (a `const` panic takes one `&str`).
struct Message {
    buf: [u8; 512],
    len: usize,
}

impl Message {
    const fn new() -> Message {
        Message {
            buf: [0; 512],
            len: 0,
        }
    }

    /// Appends `s` (cut at the buffer's end).
    const fn push(mut self, s: &[u8]) -> Message {
        let mut i = 0;
        while i < s.len() && self.len < self.buf.len() {
            self.buf[self.len] = s[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    const fn as_str(&self) -> &str {
        match std::str::from_utf8(self.buf.split_at(self.len).0) {
            Ok(s) => s,
            Err(_) => "the key table cannot be built (see crates/parser/src/fields/keys.rs)",
        }
    }
}

impl Unbuildable {
    /// What went wrong and what to do, naming the keys of `names` concerned.
    const fn message(&self, names: &[&[u8]]) -> Message {
        let m = Message::new().push(b"the key table of crates/parser/src/fields/keys.rs: ");
        match *self {
            Unbuildable::TooMany => m.push(
                b"254 keys at most (a slot is a u8, u8::MAX marks an empty one): \
                  make `KeyTable::slots` a [u16; SLOTS] with u16::MAX as the empty mark",
            ),
            Unbuildable::TooShort(i) => m
                .push(b"the key `")
                .push(names[i])
                .push(b"` is shorter than MIN_LEN bytes, the shortest spelling `Key::of` looks up: lower MIN_LEN"),
            Unbuildable::Indistinct(i, j) => m
                .push(b"the keys `")
                .push(names[i])
                .push(b"` and `")
                .push(names[j])
                .push(
                    b"` have the same length and the same first, second, middle and last \
                      bytes, all that `hashed` reads: no seed can tell them apart. Make \
                      `hashed` also read a byte in which they differ (each byte in its own \
                      bits, so that two spellings hash alike only when those bytes are equal)",
                ),
            Unbuildable::NoSeed => m.push(
                b"no seed among the first MAX_SEEDS gives every key its own slot: \
                  double SLOTS (a power of two)",
            ),
        }
    }
}

/// The key table, built at compile time; a build that cannot succeed
/// fails to compile with [`Unbuildable::message`].
static KEY_TABLE: KeyTable = match build(&NAMES) {
    Ok(t) => t,
    Err(e) => panic!("{}", e.message(&NAMES).as_str()),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lookup() {
        for (i, name) in NAMES.iter().enumerate() {
            assert_eq!(Key::of(name), Some(ALL[i]));
            assert_eq!(ALL[i] as usize, i);
        }
        for other in [
            &b""[..],
            b"x",
            b"caller",
            b"objectiveKey",
            b"Msg",
            b"msgs",
            b"tokenload",
        ] {
            assert_eq!(Key::of(other), None);
        }
    }

    /// A plausible key whose length and first, second and last bytes are
    /// those of a key already read (`stickyRequests`) still gets a table.
    #[test]
    fn a_lookalike_key_still_builds() {
        let mut names = NAMES.to_vec();
        names.push(b"stickyPrefills");
        let t = build(&names).expect("a table");
        let mut seen = std::collections::HashSet::new();
        for n in &names {
            let s = slot(n, t.seed);
            assert!(seen.insert(s), "{}", String::from_utf8_lossy(n));
            assert_eq!(
                usize::from(t.slots[s]),
                names.iter().position(|m| m == n).unwrap()
            );
        }
    }

    /// Keys the hash cannot tell apart, and too many keys, are refused at
    /// once with a message naming the keys and what to change.
    #[test]
    fn unbuildable_tables_say_why() {
        let names: [&[u8]; 3] = [b"ts", b"stickyPrefills", b"stickyPrefixes"];
        let e = build(&names).err().expect("refused");
        assert_eq!(e, Unbuildable::Indistinct(1, 2));
        let m = e.message(&names);
        let m = m.as_str();
        assert!(m.contains("`stickyPrefills` and `stickyPrefixes`"), "{m}");
        assert!(m.contains("Make `hashed` also read a byte"), "{m}");
        let short: [&[u8]; 2] = [b"ts", b"x"];
        let e = build(&short).err().expect("refused");
        assert_eq!(e, Unbuildable::TooShort(1));
        assert!(
            e.message(&short)
                .as_str()
                .contains("`x` is shorter than MIN_LEN")
        );
        let many: Vec<Vec<u8>> = (0..300).map(|i| format!("key{i}").into_bytes()).collect();
        let many: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        let e = build(&many).err().expect("refused");
        assert_eq!(e, Unbuildable::TooMany);
        assert!(e.message(&many).as_str().contains("[u16; SLOTS]"));
    }
}
