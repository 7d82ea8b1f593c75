//! The requests a recommend partial carries for the replay: per
//! deployment, what [`crate::predict::per_deployment::Requests`] keeps
//! (one [`Seen`] per request: arrival, endpoint picked, outcome, the
//! token loads of its scorer lines, exact candidates, prompt, observed
//! first token and end, the P/D prefill decision), so that a merged report
//! infers the workload, fits the engine and predicts every row as one run
//! over all the input does.
//!
//! # Encoding (`gatecal.requests/v1`)
//!
//! `{"encoding": "gatecal.requests/v1", "requests": N, "cut": C, "data":
//! BASE64}`: `data` is a zlib stream (deflate with an Adler-32 check) of a
//! columnar block, base64'd. The block is an endpoint table (the names in
//! first-use order, each a LEB128 length and UTF-8 bytes) and six columns,
//! each a LEB128 byte length and its bytes; the requests are in arrival
//! order (stable: equal arrivals stay in the order counted), a request's
//! prefill decision right after it:
//!
//! * `heads`: per decision a LEB128 of flags: bits 0–2 the outcome (0
//!   none, else 1 + its index in `not_applicable, exploration, no_match,
//!   sticky, load_override, missing_signal, request_load_override`), bit 3
//!   exact candidates, bit 4 a prompt, bits 5–6 the first token (0 none,
//!   1 as the end of the arrival's clock: `((t − arrival) × 1000) / 1000`
//!   with `t` the arrival's f64 moved by a ZigZag count of ULPs in
//!   `ttft`, 2 raw, 3 whole milliseconds), bits 7–8 the end (0 none, 1
//!   arrival plus first token, 2 raw), bit 9 a prefill decision;
//! * `times`: the arrival's f64 bit pattern less the previous request's
//!   (a prefill decision's: less its request's), ZigZag LEB128;
//! * `keys`: per request the high 32 bits of its request id's FxHash,
//!   4 bytes little-endian;
//! * `endpoints`: per decision the endpoint picked, the count of loads and
//!   their endpoints, then (with exact candidates) their count and
//!   endpoints: indexes into the table, LEB128;
//! * `numbers`: the loads, the exact candidates' in-flight and cached
//!   tokens, the prompt: a whole number below 2^53 as ZigZag LEB128
//!   shifted left by one; anything else as 1 and its f64, 8 bytes
//!   little-endian;
//! * `ttft`: the first tokens and ends not coded in `heads` alone.
//!
//! Every value decodes to the same f64, bit for bit: a merged report's
//! replay reads what a single run's reads.

use std::collections::HashMap;
use std::io::{Read, Write};

use gatecal_filter::Outcome;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::gate::hdr_v2::put_leb128 as put;
use crate::predict::per_deployment::{MAX_REPLAY_REQUESTS, MAX_REPLAY_REQUESTS_TOTAL, Requests};
use crate::predict::workload::Seen;

/// The encoding's version tag.
pub const REQUESTS_ENCODING: &str = "gatecal.requests/v1";

/// Decoded blocks past this size are refused (no real deployment's kept
/// requests come near).
const MAX_DECODED: u64 = 512 << 20;
/// Endpoints, loads or candidates per decision past this are refused.
const MAX_LIST: u64 = 1 << 16;

/// A deployment's requests kept for the replay, as a partial carries them.
#[derive(Default)]
pub(super) struct Carried {
    pub(super) seen: Vec<Seen>,
    /// Request-id fingerprints, one per request (the high 32 bits are
    /// what a partial keeps).
    pub(super) keys: Vec<u64>,
    /// Requests counted but cut past the caps.
    pub(super) cut: u64,
}

impl Carried {
    /// Takes the requests kept out of `r`.
    pub(super) fn take(r: &mut Requests) -> Carried {
        let (seen, keys, cut) = r.take_kept();
        Carried { seen, keys, cut }
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    encoding: String,
    requests: usize,
    cut: u64,
    data: String,
}

impl Serialize for Carried {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            encoding: REQUESTS_ENCODING.into(),
            requests: self.seen.len(),
            cut: self.cut,
            data: crate::gate::hdr_v2::base64(&compress(&encode(self))),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Carried {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Carried, D::Error> {
        let w = Wire::deserialize(d)?;
        let e = |m: String| serde::de::Error::custom(format!("replay requests: {m}"));
        if w.encoding != REQUESTS_ENCODING {
            return Err(e(format!(
                "encoding {:?}, this version reads {REQUESTS_ENCODING:?}",
                w.encoding
            )));
        }
        if w.requests > MAX_REPLAY_REQUESTS {
            return Err(e(format!(
                "{} requests, past the cap of {MAX_REPLAY_REQUESTS}",
                w.requests
            )));
        }
        let bytes = crate::gate::hdr_v2::unbase64(&w.data).map_err(e)?;
        let raw = decompress(&bytes).map_err(e)?;
        let (seen, keys) = decode(&raw, w.requests).map_err(e)?;
        Ok(Carried {
            seen,
            keys,
            cut: w.cut,
        })
    }
}

fn compress(raw: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec does not fail.
    let _ = z.write_all(raw);
    z.finish().unwrap_or_default()
}

fn decompress(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(bytes)
        .take(MAX_DECODED + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("not a zlib stream, or cut short ({e})"))?;
    if out.len() as u64 > MAX_DECODED {
        return Err(format!("the block decodes past {MAX_DECODED} bytes"));
    }
    Ok(out)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// The largest whole number coded as an integer.
const MAX_WHOLE: f64 = 9_007_199_254_740_992.0;

fn put_num(out: &mut Vec<u8>, x: f64) {
    if x.fract() == 0.0 && x.abs() <= MAX_WHOLE && !(x == 0.0 && x.is_sign_negative()) {
        put(out, zigzag(x as i64) << 1);
    } else {
        put(out, 1);
        out.extend_from_slice(&x.to_bits().to_le_bytes());
    }
}

/// The first token `ttft_s` of a request arriving at `ts`, coded: its
/// mode and the value written to the `ttft` column.
fn ttft_code(ts: f64, ttft_s: f64, out: &mut Vec<u8>) -> u64 {
    // The log's first token: ((t − arrival) × 1000) / 1000, t an f64 a
    // whole number of ULPs from the arrival.
    let near = (ts + ttft_s).to_bits() as i64 - ts.to_bits() as i64;
    for k in [near, near - 1, near + 1, near - 2, near + 2] {
        if from_ulps(ts, k).to_bits() == ttft_s.to_bits() {
            put(out, zigzag(k));
            return 1;
        }
    }
    let ms = (ttft_s * 1000.0).round();
    if ms.abs() <= MAX_WHOLE && (ms / 1000.0).to_bits() == ttft_s.to_bits() {
        put(out, zigzag(ms as i64));
        return 3;
    }
    out.extend_from_slice(&ttft_s.to_bits().to_le_bytes());
    2
}

fn from_ulps(ts: f64, k: i64) -> f64 {
    let t = f64::from_bits((ts.to_bits() as i64).wrapping_add(k) as u64);
    ((t - ts) * 1000.0) / 1000.0
}

#[derive(Default)]
struct Columns {
    names: Vec<String>,
    index: HashMap<String, u64>,
    heads: Vec<u8>,
    times: Vec<u8>,
    keys: Vec<u8>,
    endpoints: Vec<u8>,
    numbers: Vec<u8>,
    ttft: Vec<u8>,
}

impl Columns {
    fn endpoint(&mut self, name: &str) {
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                let i = self.names.len() as u64;
                self.names.push(name.to_string());
                self.index.insert(name.to_string(), i);
                i
            }
        };
        put(&mut self.endpoints, i);
    }

    fn decision(&mut self, s: &Seen, prev_ts: f64) {
        // Every field, so that a field added to `Seen` is not forgotten here.
        let Seen {
            ts,
            chosen,
            outcome,
            loads,
            exact,
            prompt_tokens,
            ttft_s,
            end_s,
            prefill,
        } = s;
        let mut flags = outcome
            .and_then(|o| Outcome::ALL.iter().position(|x| *x == o))
            .map_or(0, |i| i as u64 + 1);
        if exact.is_some() {
            flags |= 1 << 3;
        }
        if prompt_tokens.is_some() {
            flags |= 1 << 4;
        }
        if let Some(t) = ttft_s {
            flags |= ttft_code(*ts, *t, &mut self.ttft) << 5;
        }
        match (end_s, ttft_s) {
            (None, _) => {}
            (Some(e), Some(t)) if e.to_bits() == (ts + t).to_bits() => flags |= 1 << 7,
            (Some(e), _) => {
                flags |= 2 << 7;
                self.ttft.extend_from_slice(&e.to_bits().to_le_bytes());
            }
        }
        if prefill.is_some() {
            flags |= 1 << 9;
        }
        put(&mut self.heads, flags);
        put(
            &mut self.times,
            zigzag((ts.to_bits() as i64).wrapping_sub(prev_ts.to_bits() as i64)),
        );
        self.endpoint(chosen);
        put(&mut self.endpoints, loads.len() as u64);
        for (ep, l) in loads {
            self.endpoint(ep);
            put_num(&mut self.numbers, *l);
        }
        if let Some(ex) = exact {
            put(&mut self.endpoints, ex.len() as u64);
            for (ep, f, c) in ex {
                self.endpoint(ep);
                put_num(&mut self.numbers, *f);
                put_num(&mut self.numbers, *c);
            }
        }
        if let Some(p) = prompt_tokens {
            put_num(&mut self.numbers, *p);
        }
        if let Some(p) = prefill {
            self.decision(p, *ts);
        }
    }
}

/// The block of `c`'s requests, in arrival order.
fn encode(c: &Carried) -> Vec<u8> {
    let mut order: Vec<usize> = (0..c.seen.len()).collect();
    order.sort_by(|&a, &b| c.seen[a].ts.total_cmp(&c.seen[b].ts));
    let mut col = Columns::default();
    let mut prev = 0.0f64;
    for i in order {
        let s = &c.seen[i];
        let key = (c.keys.get(i).copied().unwrap_or(0) >> 32) as u32;
        col.keys.extend_from_slice(&key.to_le_bytes());
        col.decision(s, prev);
        prev = s.ts;
    }
    let mut out = Vec::new();
    put(&mut out, col.names.len() as u64);
    for n in &col.names {
        put(&mut out, n.len() as u64);
        out.extend_from_slice(n.as_bytes());
    }
    for column in [
        &col.heads,
        &col.times,
        &col.keys,
        &col.endpoints,
        &col.numbers,
        &col.ttft,
    ] {
        put(&mut out, column.len() as u64);
        out.extend_from_slice(column);
    }
    out
}

/// A bounds-checked reader of one column.
struct Reader<'a> {
    what: &'static str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(what: &'static str, b: &'a [u8]) -> Self {
        Reader { what, b, pos: 0 }
    }

    fn cut(&self) -> String {
        format!("the {} column is cut short", self.what)
    }

    fn get(&mut self) -> Result<u64, String> {
        let mut z: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.b.get(self.pos).ok_or_else(|| self.cut())?;
            self.pos += 1;
            z |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(z);
            }
        }
        Err(format!(
            "an integer of the {} column is too long",
            self.what
        ))
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.cut())?;
        let s = self.b.get(self.pos..end).ok_or_else(|| self.cut())?;
        self.pos = end;
        Ok(s)
    }

    fn f64(&mut self) -> Result<f64, String> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_bits(u64::from_le_bytes(a)))
    }

    fn num(&mut self) -> Result<f64, String> {
        let z = self.get()?;
        if z == 1 {
            self.f64()
        } else if z & 1 == 0 {
            Ok(unzigzag(z >> 1) as f64)
        } else {
            Err(format!("a number of the {} column is malformed", self.what))
        }
    }

    fn list_len(&mut self) -> Result<usize, String> {
        let n = self.get()?;
        if n > MAX_LIST {
            return Err(format!("a list of {n} in the {} column", self.what));
        }
        Ok(n as usize)
    }

    fn done(&self) -> Result<(), String> {
        if self.pos == self.b.len() {
            Ok(())
        } else {
            Err(format!(
                "{} bytes left over in the {} column",
                self.b.len() - self.pos,
                self.what
            ))
        }
    }
}

struct Decoder<'a> {
    names: Vec<String>,
    heads: Reader<'a>,
    times: Reader<'a>,
    endpoints: Reader<'a>,
    numbers: Reader<'a>,
    ttft: Reader<'a>,
}

impl Decoder<'_> {
    fn endpoint(&mut self) -> Result<String, String> {
        let i = self.endpoints.get()?;
        self.names
            .get(usize::try_from(i).unwrap_or(usize::MAX))
            .cloned()
            .ok_or_else(|| format!("endpoint {i} is not in the table"))
    }

    fn decision(&mut self, prev_ts: f64, nested: bool) -> Result<Seen, String> {
        let flags = self.heads.get()?;
        if flags >> 10 != 0 || (nested && flags & (1 << 9) != 0) {
            return Err(format!("unknown flags {flags:#x}"));
        }
        let outcome = match flags & 7 {
            0 => None,
            k => Some(Outcome::ALL[k as usize - 1]),
        };
        let delta = unzigzag(self.times.get()?);
        let ts = f64::from_bits((prev_ts.to_bits() as i64).wrapping_add(delta) as u64);
        if !ts.is_finite() {
            return Err("an arrival is not a finite time".into());
        }
        let ttft_s = match (flags >> 5) & 3 {
            0 => None,
            1 => Some(from_ulps(ts, unzigzag(self.ttft.get()?))),
            2 => Some(self.ttft.f64()?),
            _ => Some(unzigzag(self.ttft.get()?) as f64 / 1000.0),
        };
        let end_s = match (flags >> 7) & 3 {
            0 => None,
            1 => Some(ts + ttft_s.ok_or("an end from a first token not given")?),
            2 => Some(self.ttft.f64()?),
            _ => return Err(format!("unknown flags {flags:#x}")),
        };
        let chosen = self.endpoint()?;
        let n = self.endpoints.list_len()?;
        let mut loads = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            loads.push((self.endpoint()?, self.numbers.num()?));
        }
        let exact = if flags & (1 << 3) != 0 {
            let n = self.endpoints.list_len()?;
            let mut v = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                v.push((self.endpoint()?, self.numbers.num()?, self.numbers.num()?));
            }
            Some(v)
        } else {
            None
        };
        let prompt_tokens = if flags & (1 << 4) != 0 {
            Some(self.numbers.num()?)
        } else {
            None
        };
        let prefill = if flags & (1 << 9) != 0 {
            Some(Box::new(self.decision(ts, true)?))
        } else {
            None
        };
        Ok(Seen {
            ts,
            chosen,
            outcome,
            loads,
            exact,
            prompt_tokens,
            ttft_s,
            end_s,
            prefill,
        })
    }
}

fn column<'a>(r: &mut Reader<'a>, what: &'static str) -> Result<Reader<'a>, String> {
    let len = r.get()?;
    Ok(Reader::new(
        what,
        r.bytes(usize::try_from(len).unwrap_or(usize::MAX))?,
    ))
}

/// The `n` requests of a block, with their fingerprints.
fn decode(raw: &[u8], n: usize) -> Result<(Vec<Seen>, Vec<u64>), String> {
    let mut r = Reader::new("table", raw);
    let count = r.get()?;
    if count > MAX_LIST * 16 {
        return Err(format!("{count} endpoints in the table"));
    }
    let mut names = Vec::new();
    for _ in 0..count {
        let len = r.get()?;
        let b = r.bytes(usize::try_from(len).unwrap_or(usize::MAX))?;
        names.push(
            std::str::from_utf8(b)
                .map_err(|_| "an endpoint name is not UTF-8".to_string())?
                .to_string(),
        );
    }
    let heads = column(&mut r, "heads")?;
    let times = column(&mut r, "times")?;
    let mut keys = column(&mut r, "keys")?;
    let endpoints = column(&mut r, "endpoints")?;
    let numbers = column(&mut r, "numbers")?;
    let ttft = column(&mut r, "ttft")?;
    r.done()?;
    let mut d = Decoder {
        names,
        heads,
        times,
        endpoints,
        numbers,
        ttft,
    };
    let mut seen = Vec::with_capacity(n);
    let mut fps = Vec::with_capacity(n);
    let mut prev = 0.0f64;
    for _ in 0..n {
        let s = d.decision(prev, false)?;
        if s.ts.total_cmp(&prev).is_lt() && !seen.is_empty() {
            return Err("the requests are not in arrival order".into());
        }
        prev = s.ts;
        seen.push(s);
        let mut k = [0u8; 4];
        k.copy_from_slice(keys.bytes(4)?);
        fps.push(u64::from(u32::from_le_bytes(k)) << 32);
    }
    for c in [&d.heads, &d.times, &keys, &d.endpoints, &d.numbers, &d.ttft] {
        c.done()?;
    }
    Ok((seen, fps))
}

/// A deployment's requests merged from several parts, as a single run over
/// their input keeps them: in arrival order; a request counted by two
/// parts (the same fingerprint and arrival: its decisions straddle a
/// shard's end) once, the later part's decision refining the earlier's as
/// a later filter's decision does in one run.
pub(super) fn settle(c: &mut Carried) {
    let mut both: Vec<(Seen, u64)> = std::mem::take(&mut c.seen)
        .into_iter()
        .zip(std::mem::take(&mut c.keys))
        .collect();
    both.sort_by(|a, b| a.0.ts.total_cmp(&b.0.ts));
    let mut first: HashMap<(u64, u64), usize> = HashMap::new();
    let mut out: Vec<(Seen, u64)> = Vec::with_capacity(both.len());
    for (s, k) in both {
        match first.get(&(k >> 32, s.ts.to_bits())) {
            Some(&i) => {
                let mine = &mut out[i].0;
                let prefill = s.prefill.clone();
                mine.refine(s);
                if mine.prefill.is_none() {
                    mine.prefill = prefill;
                }
            }
            None => {
                first.insert((k >> 32, s.ts.to_bits()), out.len());
                out.push((s, k));
            }
        }
    }
    (c.seen, c.keys) = out.into_iter().unzip();
}

/// Applies the caps of one run to merged deployments: at most
/// [`MAX_REPLAY_REQUESTS`] per deployment and
/// [`MAX_REPLAY_REQUESTS_TOTAL`] in all, the first by arrival (ties by
/// deployment name), the others counted as cut.
pub(super) fn cap(deps: &mut [&mut Carried]) {
    for c in deps.iter_mut() {
        if c.seen.len() > MAX_REPLAY_REQUESTS {
            let over = c.seen.len() - MAX_REPLAY_REQUESTS;
            c.seen.truncate(MAX_REPLAY_REQUESTS);
            c.keys.truncate(MAX_REPLAY_REQUESTS);
            c.cut = c.cut.saturating_add(over as u64);
        }
    }
    let total: usize = deps.iter().map(|c| c.seen.len()).sum();
    if total <= MAX_REPLAY_REQUESTS_TOTAL {
        return;
    }
    let mut all: Vec<(f64, usize)> = deps
        .iter()
        .enumerate()
        .flat_map(|(d, c)| c.seen.iter().map(move |s| (s.ts, d)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut keep = vec![0usize; deps.len()];
    for &(_, d) in &all[..MAX_REPLAY_REQUESTS_TOTAL] {
        keep[d] += 1;
    }
    for (c, k) in deps.iter_mut().zip(keep) {
        let over = c.seen.len() - k;
        c.seen.truncate(k);
        c.keys.truncate(k);
        c.cut = c.cut.saturating_add(over as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(ts: f64) -> Seen {
        Seen {
            ts,
            chosen: "ns/a-rank-0".into(),
            outcome: Some(Outcome::Sticky),
            loads: vec![("ns/a-rank-0".into(), 6400.0), ("ns/b-rank-0".into(), 12.5)],
            exact: None,
            prompt_tokens: None,
            ttft_s: None,
            end_s: None,
            prefill: None,
        }
    }

    fn round_trip(c: &Carried) -> Carried {
        let json = serde_json::to_string(c).unwrap();
        serde_json::from_str(&json).unwrap()
    }

    /// Every field comes back bit for bit, in arrival order, whatever the
    /// values: log-like first tokens, whole milliseconds, raw ones, ends
    /// apart from the first token, exact candidates, prompts, prefill
    /// decisions, fractional and negative numbers.
    #[test]
    fn requests_round_trip_bit_for_bit() {
        let a = 1_787_320_800.307_390_2;
        let t = 1_787_320_801.012_345_6;
        let ttft = ((t - a) * 1000.0) / 1000.0;
        let mut s1 = seen(a);
        s1.ttft_s = Some(ttft);
        s1.end_s = Some(a + ttft);
        s1.prefill = Some(Box::new(Seen {
            outcome: None,
            exact: Some(vec![("ns/p-rank-0".into(), 0.0, 128.0)]),
            ..seen(a + 0.001)
        }));
        let mut s2 = seen(a - 3.5);
        s2.ttft_s = Some(0.25);
        s2.end_s = Some(9.0);
        s2.prompt_tokens = Some(4096.0);
        s2.outcome = Some(Outcome::RequestLoadOverride);
        let mut s3 = seen(a + 10.0);
        s3.ttft_s = Some(std::f64::consts::PI);
        s3.loads = vec![("ns/c".into(), -0.0), ("ns/a-rank-0".into(), 1e300)];
        s3.prompt_tokens = Some(-7.0);
        let c = Carried {
            seen: vec![s1.clone(), s2.clone(), s3.clone()],
            keys: vec![1 << 40, 2 << 40, 3 << 40],
            cut: 4,
        };
        let back = round_trip(&c);
        assert_eq!(back.cut, 4);
        assert_eq!(back.seen, vec![s2, s1, s3]);
        assert_eq!(back.keys, vec![2 << 40, 1 << 40, 3 << 40]);
        let bits = |s: &Seen| {
            (
                s.ts.to_bits(),
                s.ttft_s.map(f64::to_bits),
                s.end_s.map(f64::to_bits),
                s.loads.iter().map(|l| l.1.to_bits()).collect::<Vec<_>>(),
            )
        };
        for (x, y) in back.seen.iter().zip(&round_trip(&back).seen) {
            assert_eq!(bits(x), bits(y));
        }
        assert_eq!(
            bits(&back.seen[2]).3,
            vec![(-0.0f64).to_bits(), 1e300f64.to_bits()]
        );
        // Encoding what was decoded gives the same bytes.
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&round_trip(&back)).unwrap()
        );
    }

    #[test]
    fn damaged_blocks_are_refused_not_panicking() {
        let c = Carried {
            seen: (0..50).map(|i| seen(1e9 + f64::from(i))).collect(),
            keys: (0..50).map(|i| i << 32).collect(),
            cut: 0,
        };
        let json = serde_json::to_string(&c).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let data = v["data"].as_str().unwrap().to_string();
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = v.clone();
            f(&mut v);
            serde_json::from_value::<Carried>(v)
                .err()
                .map(|e| e.to_string())
        };
        assert!(with(&|_| {}).is_none());
        let e = with(&|v| v["encoding"] = "gatecal.requests/v9".into()).unwrap();
        assert!(e.contains("gatecal.requests/v9"), "{e}");
        let e = with(&|v| v["requests"] = 51.into()).unwrap();
        assert!(e.contains("cut short"), "{e}");
        let e = with(&|v| v["requests"] = 49.into()).unwrap();
        assert!(e.contains("left over"), "{e}");
        let e = with(&|v| v["data"] = data[..data.len() / 2].into()).unwrap();
        assert!(e.contains("zlib") || e.contains("cut short"), "{e}");
        let raw = crate::gate::hdr_v2::unbase64(&data).unwrap();
        for at in 0..raw.len() {
            for byte in [0u8, 0x55, 0xff] {
                let mut r = raw.clone();
                r[at] = byte;
                let d = crate::gate::hdr_v2::base64(&r);
                let _ = with(&|v| v["data"] = d.clone().into());
            }
        }
        // A valid zlib stream of garbage.
        let g = crate::gate::hdr_v2::base64(&compress(&[0xff; 40]));
        assert!(with(&|v| v["data"] = g.clone().into()).is_some());
    }

    /// Parts counting one request each keep it once, the later decision
    /// refining; the caps keep the first by arrival.
    #[test]
    fn merged_requests_count_once_and_are_capped() {
        let mut a = seen(5.0);
        a.outcome = Some(Outcome::NoMatch);
        let mut later = seen(5.0);
        later.outcome = Some(Outcome::LoadOverride);
        later.prefill = Some(Box::new(seen(5.0)));
        let mut c = Carried {
            seen: vec![seen(7.0), a, later, seen(6.0)],
            keys: vec![3 << 32, 1 << 32, 1 << 32, 2 << 32],
            cut: 1,
        };
        settle(&mut c);
        assert_eq!(c.seen.len(), 3);
        assert_eq!(c.keys, vec![1 << 32, 2 << 32, 3 << 32]);
        assert_eq!(c.seen[0].outcome, Some(Outcome::LoadOverride));
        assert!(c.seen[0].prefill.is_some());

        let many = |n: usize, t0: f64| Carried {
            seen: (0..n).map(|i| seen(t0 + i as f64)).collect(),
            keys: vec![0; n],
            cut: 0,
        };
        let mut x = many(MAX_REPLAY_REQUESTS + 5, 0.0);
        let mut y = many(MAX_REPLAY_REQUESTS, 0.5);
        let mut z = many(10, 1e9);
        cap(&mut [&mut x, &mut y, &mut z]);
        assert_eq!(
            x.seen.len() + y.seen.len() + z.seen.len(),
            MAX_REPLAY_REQUESTS_TOTAL
        );
        assert_eq!((x.seen.len(), x.cut), (MAX_REPLAY_REQUESTS, 5));
        assert_eq!((y.seen.len(), y.cut), (MAX_REPLAY_REQUESTS, 0));
        assert_eq!((z.seen.len(), z.cut), (0, 10));
    }
}
