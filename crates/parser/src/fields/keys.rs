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

        impl Key {
            /// The key spelled `b`: one hash-table probe and one comparison
            /// (most keys of a line are not read, and this runs for every
            /// member of every used line).
            #[inline(always)]
            pub(crate) fn of(b: &[u8]) -> Option<Key> {
                let t = &KEY_TABLE;
                let k = t.slots[slot(b, t.seed)];
                if k == u8::MAX {
                    return None;
                }
                let k = usize::from(k);
                short_eq(NAMES[k], b).then(|| ALL[k])
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

/// Slots of the key table (a power of two, several times [`NKEYS`]).
const SLOTS: usize = 512;

/// A collision-free table of the keys: `slots[slot(name, seed)]` is the
/// index of the key spelled `name`, `u8::MAX` for an empty slot.
struct KeyTable {
    seed: u32,
    slots: [u8; SLOTS],
}

/// The slot of a key spelling: its length and first, second and last bytes,
/// mixed with `seed`.
#[inline(always)]
const fn slot(b: &[u8], seed: u32) -> usize {
    let n = b.len();
    let first = if n > 0 { b[0] } else { 0 };
    let second = if n > 1 { b[1] } else { 0 };
    let last = if n > 0 { b[n - 1] } else { 0 };
    let x = (n as u32) ^ ((first as u32) << 8) ^ ((second as u32) << 16) ^ ((last as u32) << 24);
    (x.wrapping_mul(seed) >> 23) as usize % SLOTS
}

/// The key table, built at compile time: the first odd multiplier that
/// separates all keys.
static KEY_TABLE: KeyTable = {
    let mut seed: u32 = 0x9E37_79B1;
    loop {
        let mut slots = [u8::MAX; SLOTS];
        let mut i = 0;
        let mut free = true;
        while i < NKEYS {
            let s = slot(NAMES[i], seed);
            if slots[s] != u8::MAX {
                free = false;
                break;
            }
            slots[s] = i as u8;
            i += 1;
        }
        if free {
            break KeyTable { seed, slots };
        }
        seed = seed.wrapping_add(0x6A09_E668) | 1;
    }
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
}
