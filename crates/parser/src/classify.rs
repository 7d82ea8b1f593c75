//! One line to one [`Class`]: an event, an ignored shape, or a malformed line.
//!
//! The hot path: after framing, a zap JSON line is looked at only through
//! its message, read from zap's usual head (`{"level":…,"ts":…,"caller":…,
//! "msg":"…"`; other lines: a literal search for `"msg":"`), and a table
//! lookup of the message. Lines with other messages are counted as ignored
//! after a single cheap check (the line must end with `}`), without any more
//! JSON work or allocation. Only lines with a known message are scanned
//! (the fast walk of [`json::zap_members`], else the scanner), borrowing
//! every value, and only the keys the event needs are converted.

use std::sync::OnceLock;

use memchr::memmem::Finder;

use crate::arena::Arena;
use crate::decision::{GatePenalty, ValueFlags};
use crate::event::{ArenaEvent, Event, FilterLine, LineMeta};
use crate::fields::{self, Fields, Key};
use crate::json::{self, Val};
use crate::ledger::{LineShape, MalformedReason};
use crate::messages::{Kind, kind_of};
use crate::vllm;

/// The classification of one line.
// Returned by value and consumed at once: boxing the used line would cost an
// allocation per used line.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Class<'a> {
    /// The line gave an event.
    Used(Used<'a>),
    /// A well-formed line the analysis does not need.
    Ignored(LineShape),
    /// A line that could not be read.
    Malformed(LineShape, MalformedReason),
}

/// A used line. Its request id and model are left borrowed from the line
/// (the `x-request-id` and model keys of every used line would otherwise be
/// two allocations per line, made on a worker and freed on the assembling
/// thread); [`LineMeta::request_id`] and [`LineMeta::model`] stay `None`.
pub(crate) struct Used<'a> {
    pub meta: LineMeta,
    /// The event, its strings in the arena given to [`classify`].
    pub event: ArenaEvent,
    pub flags: ValueFlags,
    /// The `x-request-id` string value, raw.
    pub request_id: Option<RawStr<'a>>,
    /// The model string value (see [`LineMeta::model`]), raw.
    pub model: Option<RawStr<'a>>,
}

/// A JSON string value as written: the bytes between the quotes and
/// whether they hold a backslash escape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawStr<'a> {
    pub bytes: &'a [u8],
    pub esc: bool,
}

impl RawStr<'_> {
    /// The value, unescaped and owned.
    #[cfg(test)]
    pub(crate) fn to_owned_string(self) -> String {
        json::unescape(self.bytes, self.esc).into_owned()
    }
}

/// A string-valued key, raw.
fn raw_str<'a>(f: &Fields<'a>, k: Key) -> Option<RawStr<'a>> {
    match f.get(k)? {
        Val::Str(bytes, esc) => Some(RawStr { bytes, esc }),
        _ => None,
    }
}

/// The model keys, in order of precedence.
fn raw_model<'a>(f: &Fields<'a>) -> Option<RawStr<'a>> {
    raw_str(f, Key::TargetModelName)
        .or_else(|| raw_str(f, Key::ResolvedTargetModel))
        .or_else(|| raw_str(f, Key::Model))
}

fn msg_finder() -> &'static Finder<'static> {
    static F: OnceLock<Finder<'static>> = OnceLock::new();
    F.get_or_init(|| Finder::new(b"\"msg\":\""))
}

/// The key after the picker's targets (a searcher built once, not per line).
fn scored_finder() -> &'static Finder<'static> {
    static F: OnceLock<Finder<'static>> = OnceLock::new();
    F.get_or_init(|| Finder::new(b"\"ScoredCandidates\""))
}

fn avg_finder() -> &'static Finder<'static> {
    static F: OnceLock<Finder<'static>> = OnceLock::new();
    F.get_or_init(|| Finder::new(b"Avg prompt throughput: "))
}

/// Trims trailing `\r`, spaces and tabs.
#[inline]
pub(crate) fn trim_end(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., b'\r' | b' ' | b'\t' | b'\n'] = b {
        b = rest;
    }
    b
}

/// Classifies a line body (framing already taken off, trailing whitespace
/// trimmed); the event's strings go to `a`.
pub(crate) fn classify<'a>(body: &'a [u8], a: &mut Arena) -> Class<'a> {
    let Some(&first) = body.first() else {
        return Class::Ignored(LineShape::Blank);
    };
    if first == b'{' {
        return zap_json(body, a);
    }
    if first.is_ascii_digit()
        && memchr::memchr(b'\t', body).is_some()
        && let Some(c) = console(body, a)
    {
        return c;
    }
    if is_klog(body) {
        return Class::Ignored(LineShape::Klog);
    }
    if let Some(h) = vllm::find_header(body) {
        let rest = &body[h.body..];
        if avg_finder().find(rest).is_some() {
            let glued = vllm::find_glued(rest);
            let (own, next) = match glued {
                Some((at, body)) => (&rest[..at], stats_record(&rest[at..], body - at)),
                None => (rest, None),
            };
            let text = String::from_utf8_lossy(own);
            return match vllm::parse_stats_body(&text) {
                Ok(mut st) => {
                    st.level = String::from_utf8_lossy(h.level).into_owned();
                    st.month = h.month;
                    st.day = h.day;
                    st.seconds_of_day = h.secs;
                    st.glued = next.map(Box::new);
                    Class::Used(Used {
                        meta: LineMeta::default(),
                        event: Event::VllmStats(Box::new(st)),
                        flags: ValueFlags::default(),
                        request_id: None,
                        model: None,
                    })
                }
                Err(vllm::BadStats::Unparsable) => {
                    Class::Malformed(LineShape::Vllm, MalformedReason::BadVllmStats)
                }
                Err(vllm::BadStats::Cut) => {
                    Class::Malformed(LineShape::Vllm, MalformedReason::CutVllmStats)
                }
            };
        }
        if rest.starts_with(b"Prefix cache hit rate: GPU: ") {
            return Class::Ignored(LineShape::VllmV0HitRate);
        }
        return Class::Ignored(LineShape::Vllm);
    }
    if body.starts_with(b"error: ") || body == b"error:" {
        return Class::Ignored(LineShape::KubectlError);
    }
    if is_go_panic(body) {
        return Class::Ignored(LineShape::GoPanic);
    }
    if body.iter().all(|c| c.is_ascii_whitespace()) {
        return Class::Ignored(LineShape::Blank);
    }
    // The tail of a JSON line cut at its start (rotation, CRI split).
    if body.ends_with(b"}") && memchr::memmem::find(body, b"\":").is_some() {
        return Class::Malformed(LineShape::Other, MalformedReason::JsonFragment);
    }
    Class::Ignored(LineShape::Other)
}

/// The stats record glued after another on one line: `rec` starts at its
/// prefix, its body at `body`. `None` when it is no stats record, or not a
/// whole one (it is then not read; its line's first record is).
fn stats_record(rec: &[u8], body: usize) -> Option<vllm::VllmStats> {
    let h = vllm::find_header(rec)?;
    let text = String::from_utf8_lossy(&rec[body..]);
    let mut st = vllm::parse_stats_body(&text).ok()?;
    st.level = String::from_utf8_lossy(h.level).into_owned();
    st.month = h.month;
    st.day = h.day;
    st.seconds_of_day = h.secs;
    Some(st)
}

/// `I0821 14:36:14.123456       1 file.go:257] ...` (also W, E, F).
fn is_klog(b: &[u8]) -> bool {
    b.len() > 22
        && matches!(b[0], b'I' | b'W' | b'E' | b'F')
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' '
        && b[6..8].iter().all(u8::is_ascii_digit)
        && b[8] == b':'
        && b[11] == b':'
}

fn is_go_panic(b: &[u8]) -> bool {
    is_go_frame(b)
        || b.starts_with(b"panic: ")
        || b.starts_with(b"goroutine ")
        || b.starts_with(b"\t")
        || b.starts_with(b"created by ")
        || b.starts_with(b"[signal ")
        || b.starts_with(b"fatal error: ")
        || b.starts_with(b"runtime.")
        || b.starts_with(b"main.")
        || b.starts_with(b"exit status ")
}

/// A stack frame's function line: `pkg/path.(*Type).Method(0xc000..., ...)`,
/// no space before its first `(` and ending with `)`.
fn is_go_frame(b: &[u8]) -> bool {
    let Some(open) = memchr::memchr(b'(', b) else {
        return false;
    };
    open > 0
        && b.ends_with(b")")
        && !b[..open].contains(&b' ')
        && b[..open].contains(&b'.')
        && !b.starts_with(b"{")
}

/// A zap JSON line: the prefilter, then a borrowed scan of known messages.
fn zap_json<'a>(body: &'a [u8], a: &mut Arena) -> Class<'a> {
    // zap's usual head gives the message; other lines are searched.
    let head = json::zap_head(body);
    let msg = match head {
        Some(([.., msg], _)) => Some(msg),
        None => msg_finder().find(body).and_then(|p| {
            let start = p + 7;
            let off = memchr::memchr2(b'"', b'\\', &body[start..])?;
            (body[start + off] == b'"').then(|| &body[start..start + off])
        }),
    };
    match msg.map(kind_of) {
        None => full(body, None, None, a),
        Some(Some(kind)) => full(body, Some(kind), head, a),
        Some(None) if body.ends_with(b"}") => Class::Ignored(LineShape::ZapJson),
        Some(None) => Class::Malformed(
            LineShape::ZapJson,
            MalformedReason::BadJson { at: body.len() },
        ),
    }
}

/// Scans the whole object. `kind` is the prefilter's guess; the scanned
/// top-level `msg` decides.
fn full<'a>(
    body: &'a [u8],
    kind: Option<Kind>,
    head: Option<json::ZapHead<'a>>,
    a: &mut Arena,
) -> Class<'a> {
    if let Some(k @ (Kind::BeforeFilters | Kind::FilterCompleted | Kind::PickerCompleted)) = kind
        && let Some(c) = dump_fast(body, k, head, a)
    {
        return c;
    }
    let mut f = Fields::new();
    if json::zap_members(body, head, None, |k, esc, v| f.put(k, esc, v)).is_none() {
        // Not the usual shape: the scanner reads it (again) from the start.
        f = Fields::new();
        if let Err(e) = json::members(body, |k, esc, v| f.put(k, esc, v)) {
            // Cut short or broken after its message and request id: a
            // filter line is still its request's (the members before the
            // error name them).
            return unknown_filter(&f, Key::Msg, e.reason())
                .unwrap_or(Class::Malformed(LineShape::ZapJson, e.reason()));
        }
    }
    let kind = match f.get(Key::Msg) {
        // The head's own message (not a later `msg` member): the kind the
        // prefilter looked up from it.
        Some(Val::Str(raw, false)) if is_head_msg(raw, head) => kind,
        // The message as written (no copy, no UTF-8 check) unless escaped.
        Some(Val::Str(raw, false)) => kind_of(raw),
        Some(v @ Val::Str(_, true)) => v.as_str().and_then(|m| kind_of(m.as_bytes())),
        _ => None,
    };
    let Some(kind) = kind else {
        return Class::Ignored(LineShape::ZapJson);
    };
    let Ok(ts) = line_ts(&f) else {
        let reason = MalformedReason::OutOfRange("ts");
        return unknown_filter(&f, Key::Ts, reason)
            .unwrap_or_else(|| out_of_range(LineShape::ZapJson, "ts"));
    };
    let mut meta = LineMeta {
        ts,
        v: match f.get(Key::Level) {
            Some(Val::Str(raw, _)) => fields::level(raw),
            _ => None,
        },
        ..LineMeta::default()
    };
    build(kind, &f, &mut meta, LineShape::ZapJson, a)
}

/// Whether `msg` is the message of zap's head `head` itself, the same bytes
/// of the line (a later `msg` member is other bytes): [`zap_json`] looked
/// its kind up already, and the caller's `kind` is that.
#[inline]
fn is_head_msg(msg: &[u8], head: Option<json::ZapHead<'_>>) -> bool {
    matches!(head, Some(([.., m], _)) if std::ptr::eq(m, msg))
}

/// The lines that carry endpoint dumps (`Before running filter plugins`,
/// `Completed running filter plugin successfully`, the picker result): the
/// keys before the dump are scanned as usual, the dump itself only searched
/// for its `"ID":{...}` objects. Used only for the known dump shape, an
/// array of reflected endpoints that start with their `ID` (a Go slice has
/// one element type, so all elements do); the dump is the last key zap
/// writes for these messages, and the line must end with `]}` (`}}` for the
/// picker's result object) so a line cut inside the dump is not taken as
/// complete. `None` falls back to the full scan.
fn dump_fast<'a>(
    body: &'a [u8],
    kind: Kind,
    head: Option<json::ZapHead<'a>>,
    a: &mut Arena,
) -> Option<Class<'a>> {
    let mut f = Fields::new();
    let stop: &[u8] = if kind == Kind::PickerCompleted {
        b"result"
    } else {
        b"endpoints"
    };
    let at = match json::zap_members(body, head, Some(stop), |k, e, v| f.put(k, e, v)) {
        Some(at) => at?,
        None => {
            f = Fields::new();
            json::Scanner::new(body)
                .object_until(stop, |k, e, v| f.put(k, e, v))
                .ok()??
        }
    };
    let msg = f.get(Key::Msg)?;
    let Val::Str(m, false) = msg else { return None };
    if !is_head_msg(m, head) && kind_of(m) != Some(kind) {
        return None;
    }
    let tail = &body[at..];
    let ids = if kind == Kind::PickerCompleted {
        if !tail.ends_with(b"}}") || !tail.starts_with(b"{\"TargetEndpoints\":[{\"ID\":{") {
            return None;
        }
        let end = scored_finder().find(tail).unwrap_or(tail.len());
        fields::dump_ids(&tail[..end], a)?
    } else if tail == b"null}" {
        a.list_from(a.list_start())
    } else {
        if !tail.ends_with(b"]}") || !tail.starts_with(b"[{\"ID\":{") {
            return None;
        }
        fields::dump_ids(tail, a)?
    };
    let Ok(ts) = line_ts(&f) else {
        return Some(out_of_range(LineShape::ZapJson, "ts"));
    };
    let meta = LineMeta {
        ts,
        v: match f.get(Key::Level) {
            Some(Val::Str(raw, _)) => fields::level(raw),
            _ => None,
        },
        ..LineMeta::default()
    };
    let request_id = raw_str(&f, Key::RequestId);
    let model = raw_model(&f);
    let event = match kind {
        Kind::BeforeFilters => Event::BeforeFilters { endpoints: ids },
        Kind::FilterCompleted => Event::FilterCompleted {
            plugin: f.span(Key::Plugin, a)?,
            survivors: Some(ids),
        },
        _ => Event::PickerCompleted { targets: ids },
    };
    Some(Class::Used(Used {
        meta,
        event,
        flags: ValueFlags::default(),
        request_id,
        model,
    }))
}

/// A console-encoder line: `time\tLEVEL\t[logger\t]caller\tmsg\t{json}`.
fn console<'a>(body: &'a [u8], a: &mut Arena) -> Option<Class<'a>> {
    let mut parts = body.split(|&c| c == b'\t');
    let time = parts.next()?;
    let level = parts.next()?;
    let lv = fields::level(level)?;
    let rest: Vec<&[u8]> = parts.collect();
    let (msg, ctx) = match rest.as_slice() {
        [] => return Some(Class::Ignored(LineShape::Console)),
        [.., m, c] if c.first() == Some(&b'{') => (*m, Some(*c)),
        [.., m] => (*m, None),
    };
    let ts = crate::time::parse_rfc3339(time).or_else(|| {
        let x: f64 = std::str::from_utf8(time).ok()?.parse().ok()?;
        fields::plausible_epoch(x)
    });
    ts?;
    let Some(kind) = kind_of(msg) else {
        return Some(Class::Ignored(LineShape::Console));
    };
    let mut f = Fields::new();
    if let Some(c) = ctx
        && let Err(e) = json::members(c, |k, esc, v| f.put(k, esc, v))
    {
        return Some(Class::Malformed(LineShape::Console, e.reason()));
    }
    let mut meta = LineMeta {
        ts,
        v: Some(lv),
        ..LineMeta::default()
    };
    Some(build(kind, &f, &mut meta, LineShape::Console, a))
}

/// A filter line malformed for `reason` (`key`'s value, or its JSON) whose
/// members read so far (`f`) name its message and request: its request's
/// filter line with no value and an unknown outcome, counted malformed
/// (not lost, nor taken for a `not_applicable` inferred from the
/// completion line after it). `None` for any other line.
fn unknown_filter<'a>(f: &Fields<'a>, key: Key, reason: MalformedReason) -> Option<Class<'a>> {
    let kind = match f.get(Key::Msg)? {
        Val::Str(raw, false) => kind_of(raw),
        v @ Val::Str(_, true) => v.as_str().and_then(|m| kind_of(m.as_bytes())),
        _ => None,
    }?;
    let Kind::Filter(msg) = kind else {
        return None;
    };
    let request_id = raw_str(f, Key::RequestId)?;
    Some(Class::Used(Used {
        meta: LineMeta::default(),
        event: Event::Filter(Box::new(FilterLine::malformed(msg, key, reason))),
        flags: ValueFlags {
            out_of_range: Some(key),
            ..ValueFlags::default()
        },
        request_id: Some(request_id),
        model: if kind.reads_model() {
            raw_model(f)
        } else {
            None
        },
    }))
}

fn missing(shape: LineShape, k: &'static str) -> Class<'static> {
    Class::Malformed(shape, MalformedReason::MissingKey(k))
}

/// The line's `ts` (`None` when absent or `null`); `Err` for a number that
/// is no plausible epoch time (`1e400`, `-5e12`) and for any other value
/// that is not an RFC 3339 time (`"NaN"`, `"x"`, `true`).
fn line_ts(f: &Fields<'_>) -> Result<Option<f64>, ()> {
    match f.get(Key::Ts) {
        Some(Val::Null) | None => Ok(None),
        Some(v) => fields::ts(v).map(Some).ok_or(()),
    }
}

fn out_of_range(shape: LineShape, k: &'static str) -> Class<'static> {
    Class::Malformed(shape, MalformedReason::OutOfRange(k))
}

/// A count (tokens, requests, endpoints, tokens/s): [`crate::domain::is_count`].
fn is_count(x: f64) -> bool {
    crate::domain::is_count(x)
}

/// The first key of `vals` whose value is set and fails `ok`.
fn first_bad<K: Copy>(vals: &[(K, Option<f64>)], ok: fn(f64) -> bool) -> Option<K> {
    vals.iter()
        .find(|(_, v)| v.is_some_and(|x| !ok(x)))
        .map(|(k, _)| *k)
}

/// Builds the event of a known message from its fields.
fn build<'a>(
    kind: Kind,
    f: &Fields<'a>,
    meta: &mut LineMeta,
    shape: LineShape,
    a: &mut Arena,
) -> Class<'a> {
    let request_id = raw_str(f, Key::RequestId);
    // The model is read from the lines that start or name a decision only
    // (every request-path line repeats it).
    let model = if kind.reads_model() {
        raw_model(f)
    } else {
        None
    };
    let mut flags = ValueFlags::default();
    let event = match kind {
        Kind::Filter(msg) => {
            let threshold = f.num(Key::AffinityThreshold, &mut flags);
            let mut l = FilterLine {
                msg,
                affinity_threshold: threshold.or_else(|| f.num(Key::Tau, &mut flags)),
                total: f.num(Key::Total, &mut flags),
                sticky: f.num(Key::Sticky, &mut flags),
                best_sticky_ttft_ms: f.num(Key::BestStickyTtft, &mut flags),
                best_non_sticky_ttft_ms: f.num(Key::BestNonStickyTtft, &mut flags),
                penalty: f
                    .num(Key::Penalty, &mut flags)
                    .map(|v| GatePenalty::of(msg, v)),
                max_penalty: f
                    .num(Key::MaxPenalty, &mut flags)
                    .map(|v| GatePenalty::of(msg, v)),
                ..FilterLine::default()
            };
            let x = &mut l.extras;
            x.prefill_throughput = f.num(Key::PrefillThroughput, &mut flags);
            x.sticky_observed = f.bool(Key::StickyObserved);
            x.non_sticky_observed = f.bool(Key::NonStickyObserved);
            x.best_sticky_tokens = f.num(Key::BestStickyTokens, &mut flags);
            x.best_non_sticky_tokens = f.num(Key::BestNonStickyTokens, &mut flags);
            x.sticky_requests = f.num(Key::StickyRequests, &mut flags);
            x.non_sticky_requests = f.num(Key::NonStickyRequests, &mut flags);
            x.max_delta = f.num(Key::MaxDelta, &mut flags);
            x.sticky_request_ttft_ms = f.num(Key::StickyRequestTtft, &mut flags);
            x.non_sticky_request_ttft_ms = f.num(Key::NonStickyRequestTtft, &mut flags);
            x.added = f.num(Key::Added, &mut flags);
            x.min_cached_tokens_fraction = f.num(Key::MinCachedTokensFraction, &mut flags);
            x.min_cached_tokens = f.num(Key::MinCachedTokens, &mut flags);
            x.sticky_cost = f.num(Key::StickyCost, &mut flags);
            x.non_sticky_cost = f.num(Key::NonStickyCost, &mut flags);
            x.remaining_turns = f.num(Key::RemainingTurns, &mut flags);
            x.penalty_source = f.string(Key::PenaltySource);
            let counts = [
                (Key::Total, l.total),
                (Key::Sticky, l.sticky),
                (Key::PrefillThroughput, x.prefill_throughput),
                (Key::BestStickyTokens, x.best_sticky_tokens),
                (Key::BestNonStickyTokens, x.best_non_sticky_tokens),
                (Key::StickyRequests, x.sticky_requests),
                (Key::NonStickyRequests, x.non_sticky_requests),
                (Key::MaxDelta, x.max_delta),
                (Key::Added, x.added),
                (Key::MinCachedTokens, x.min_cached_tokens),
                (Key::RemainingTurns, x.remaining_turns),
            ];
            // TTFTs and penalties may be NaN or infinite (zap's strings,
            // flagged) or `math.MaxFloat64` (a side without a prediction,
            // flagged); thresholds and costs are finite.
            let reals = [
                (Key::AffinityThreshold, l.affinity_threshold),
                (Key::MinCachedTokensFraction, x.min_cached_tokens_fraction),
                (Key::StickyCost, x.sticky_cost),
                (Key::NonStickyCost, x.non_sticky_cost),
            ];
            // A numeric key whose value is no number (`"penalty":"x"`):
            // present, and read as none above. `tau` was read only without
            // an `affinityThreshold` number; otherwise it is read here.
            let tau = || {
                if threshold.is_none() {
                    l.affinity_threshold.is_some()
                } else {
                    f.get(Key::Tau)
                        .and_then(|v| fields::number(v, &mut ValueFlags::default()))
                        .is_some()
                }
            };
            // Whether each was read as a number.
            let read = [
                (Key::AffinityThreshold, threshold.is_some()),
                (Key::Tau, tau()),
                (Key::Total, l.total.is_some()),
                (Key::Sticky, l.sticky.is_some()),
                (Key::BestStickyTtft, l.best_sticky_ttft_ms.is_some()),
                (Key::BestNonStickyTtft, l.best_non_sticky_ttft_ms.is_some()),
                (Key::Penalty, l.penalty.is_some()),
                (Key::MaxPenalty, l.max_penalty.is_some()),
                (Key::PrefillThroughput, x.prefill_throughput.is_some()),
            ];
            let not_a_number = read
                .iter()
                .find_map(|&(key, number)| (!number && f.get(key).is_some()).then_some(key));
            if let Some(k) = first_bad(&counts, is_count)
                .or_else(|| first_bad(&reals, crate::domain::is_threshold))
                .or(not_a_number)
            {
                // The line is malformed, but it is still this request's
                // filter line: with a request id, its decision is made
                // with no value and an unknown outcome (not lost, nor taken
                // for `not_applicable`).
                if request_id.is_none() {
                    return out_of_range(shape, k.name());
                }
                l = FilterLine {
                    msg,
                    flags: ValueFlags {
                        out_of_range: Some(k),
                        ..ValueFlags::default()
                    },
                    ..FilterLine::default()
                };
                flags = l.flags;
            }
            l.flags = flags;
            Event::Filter(Box::new(l))
        }
        Kind::EndpointTtft => {
            let Some(endpoint) = f.get(Key::Endpoint).and_then(|v| fields::endpoint(v, a)) else {
                return missing(shape, "endpoint");
            };
            let throughput = f.num(Key::Throughput, &mut flags);
            let in_flight_tokens = f.num(Key::InFlightTokens, &mut flags);
            let vals = [
                ("throughput", throughput),
                ("inFlightTokens", in_flight_tokens),
            ];
            if let Some(k) = first_bad(&vals, is_count) {
                return out_of_range(shape, k);
            }
            Event::EndpointTtft {
                endpoint,
                throughput,
                in_flight_tokens,
            }
        }
        Kind::PeakResolved | Kind::CalibrationSkipped => {
            let peak = f.num(Key::PeakPrefillThroughput, &mut flags);
            if first_bad(&[("peakPrefillThroughput", peak)], is_count).is_some() {
                return out_of_range(shape, "peakPrefillThroughput");
            }
            if kind == Kind::PeakResolved {
                Event::PeakPrefillResolved {
                    peak_prefill_throughput: peak,
                    source: f.span(Key::Source, a),
                }
            } else {
                Event::CalibrationSkipped {
                    peak_prefill_throughput: peak,
                    reason: f.span(Key::Reason, a),
                }
            }
        }
        Kind::Received => Event::ReceivedRequest,
        Kind::ResponseBody => {
            let bytes = f.num(Key::ResponseBytes, &mut flags);
            if first_bad(&[("len(responseBytes)", bytes)], is_count).is_some() {
                return out_of_range(shape, "len(responseBytes)");
            }
            Event::ResponseBody {
                bytes,
                end_of_stream: f.bool(Key::EndOfStream),
            }
        }
        Kind::Profile => match f.span(Key::Profile, a) {
            Some(profile) => Event::SchedulerProfile { profile },
            None => return missing(shape, "profile"),
        },
        Kind::BeforeFilters => Event::BeforeFilters {
            endpoints: f
                .get(Key::Endpoints)
                .and_then(|v| fields::endpoint_list(v, a))
                .unwrap_or_default(),
        },
        Kind::RunningFilter => match f.span(Key::Plugin, a) {
            Some(plugin) => Event::RunningFilter { plugin },
            None => return missing(shape, "plugin"),
        },
        Kind::FilterCompleted => match f.span(Key::Plugin, a) {
            Some(plugin) => Event::FilterCompleted {
                plugin,
                survivors: f
                    .get(Key::Endpoints)
                    .and_then(|v| fields::endpoint_list(v, a)),
            },
            None => return missing(shape, "plugin"),
        },
        Kind::EliminatedAll => match f.span(Key::Plugin, a) {
            Some(plugin) => Event::FilterEliminatedAll { plugin },
            None => return missing(shape, "plugin"),
        },
        Kind::FiltersCompleted => {
            let remaining = f.num(Key::RemainingEndpoints, &mut flags);
            if first_bad(&[("remainingEndpoints", remaining)], is_count).is_some() {
                return out_of_range(shape, "remainingEndpoints");
            }
            Event::FiltersCompleted { remaining }
        }
        Kind::Score => {
            let Some(plugin) = f.span(Key::Plugin, a) else {
                return missing(shape, "plugin");
            };
            let Some(endpoint) = f.get(Key::Endpoint).and_then(|v| fields::endpoint(v, a)) else {
                return missing(shape, "endpoint");
            };
            let Some(score) = f.num(Key::Score, &mut flags) else {
                return missing(shape, "score");
            };
            if !crate::domain::is_threshold(score) {
                return out_of_range(shape, "score");
            }
            Event::Score {
                plugin,
                endpoint,
                score,
            }
        }
        Kind::TokenLoad => {
            let Some(endpoint) = f.get(Key::Endpoint).and_then(|v| fields::endpoint(v, a)) else {
                return missing(shape, "endpoint");
            };
            let Some(token_load) = f.num(Key::TokenLoad, &mut flags) else {
                return missing(shape, "tokenLoad");
            };
            if !is_count(token_load) {
                return out_of_range(shape, "tokenLoad");
            }
            let score = f.num(Key::Score, &mut flags);
            if first_bad(&[("score", score)], crate::domain::is_threshold).is_some() {
                return out_of_range(shape, "score");
            }
            Event::TokenLoad {
                endpoint,
                token_load,
                score,
            }
        }
        Kind::HitPercentage => {
            let prompt_tokens = f.num(Key::PromptLength, &mut flags);
            let hit_prefix_tokens = f.num(Key::HitPrefixTokens, &mut flags);
            let vals = [
                ("prompt length (token)", prompt_tokens),
                ("absolute hit prefix len (tokens)", hit_prefix_tokens),
            ];
            if let Some(k) = first_bad(&vals, is_count) {
                return out_of_range(shape, k);
            }
            Event::HitPercentage {
                prompt_tokens,
                hit_prefix_tokens,
            }
        }
        Kind::CachedServers => {
            let total_blocks = f.num(Key::TotalBlocks, &mut flags);
            if first_bad(&[("total # blocks", total_blocks)], is_count).is_some() {
                return out_of_range(shape, "total # blocks");
            }
            Event::CachedServers { total_blocks }
        }
        Kind::ProduceCompleted => {
            // Other producers log the same message with other keys (the
            // P2P source producer's `bestCachedTokens`): not read.
            let (true, Some(scores)) = (f.get(Key::BlockKeys).is_some(), f.get(Key::Scores)) else {
                return Class::Ignored(shape);
            };
            let Some(total_blocks) = f.num(Key::BlockKeys, &mut flags) else {
                return out_of_range(shape, "blockKeys");
            };
            if !is_count(total_blocks) {
                return out_of_range(shape, "blockKeys");
            }
            let Some((endpoints, max_match_blocks)) = fields::max_member(scores) else {
                return out_of_range(shape, "scores");
            };
            let Val::Obj(raw) = scores else {
                return out_of_range(shape, "scores");
            };
            Event::PreciseProduced {
                total_blocks,
                max_match_blocks,
                endpoints,
                scores: a.push(raw),
            }
        }
        Kind::PickerCompleted => Event::PickerCompleted {
            targets: f
                .get(Key::Result)
                .and_then(|v| fields::picker_targets(v, a))
                .unwrap_or_default(),
        },
        Kind::Handled => Event::RequestHandled {
            endpoint: f.span(Key::Endpoint, a),
        },
    };
    Class::Used(Used {
        meta: std::mem::take(meta),
        event,
        flags,
        request_id,
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::FilterMsg;

    /// [`super::classify`] with an arena of its own.
    fn classify(body: &[u8]) -> Class<'_> {
        super::classify(body, &mut Arena::default())
    }

    /// The used line, with its borrowed request id and model put in its meta.
    fn used(line: &str) -> Used<'_> {
        match classify(line.as_bytes()) {
            Class::Used(mut u) => {
                u.meta.request_id = u.request_id.map(RawStr::to_owned_string);
                u.meta.model = u.model.map(RawStr::to_owned_string);
                u
            }
            Class::Ignored(s) => panic!("ignored {s:?}: {line}"),
            Class::Malformed(s, r) => panic!("malformed {s:?} {r}: {line}"),
        }
    }

    #[test]
    fn head_gate_broken() {
        let u = used(
            r#"{"level":"debug","ts":1755786974.1301,"caller":"prefixcacheaffinity/plugin.go:201","msg":"PrefixCacheAffinityFilter: TTFT load gate broken","x-request-id":"req-0042","objectiveKey":"chat","incomingModelName":"Qwen/Qwen3-32B","targetModelName":"Qwen/Qwen3-32B","priority":0,"bestStickyTTFT":18834.756403817177,"bestNonStickyTTFT":125.56504269211452,"penalty":18709.191361125064,"maxPenalty":18000}"#,
        );
        assert_eq!(u.meta.request_id.as_deref(), Some("req-0042"));
        assert_eq!(u.meta.v, Some(4));
        assert_eq!(u.meta.model.as_deref(), Some("Qwen/Qwen3-32B"));
        assert_eq!(u.meta.ts, Some(1755786974.1301));
        let Event::Filter(l) = u.event else { panic!() };
        assert_eq!(l.msg, FilterMsg::TtftGateBroken);
        assert_eq!(l.penalty, Some(GatePenalty::Ms(18709.191361125064)));
        assert_eq!(l.max_penalty, Some(GatePenalty::Ms(18000.0)));
    }

    /// A numeric key of a filter line whose value is no number names that
    /// key, with or without a request id; `tau` too when an
    /// `affinityThreshold` number was read instead; the first in the
    /// keys' order when several are.
    #[test]
    fn filter_keys_with_no_number() {
        let line = |id: &str, keys: &str| {
            format!(
                r#"{{"level":"debug","ts":1755786974.5,"caller":"p.go:1","msg":"PrefixCacheAffinityFilter: TTFT load gate broken"{id},"bestStickyTTFT":100,"bestNonStickyTTFT":5,"penalty":95,"maxPenalty":18000{keys}}}"#
            )
        };
        let bad = |id: &str, keys: &str| {
            let l = line(id, keys);
            match classify(l.as_bytes()) {
                Class::Malformed(_, MalformedReason::OutOfRange(key)) => Some(key),
                Class::Used(u) => match u.event {
                    Event::Filter(f) => f.flags.out_of_range(),
                    _ => panic!("{l}"),
                },
                _ => panic!("{l}"),
            }
        };
        let id = r#","x-request-id":"r1""#;
        for id in ["", id] {
            assert_eq!(bad(id, r#","tau":0.5"#), None);
            assert_eq!(bad(id, r#","affinityThreshold":0.5,"tau":0.25"#), None);
            assert_eq!(bad(id, r#","tau":"x""#), Some("tau"));
            assert_eq!(
                bad(id, r#","affinityThreshold":0.5,"tau":"x""#),
                Some("tau")
            );
            assert_eq!(
                bad(id, r#","affinityThreshold":"x","tau":0.5"#),
                Some("affinityThreshold")
            );
            assert_eq!(bad(id, r#","total":true"#), Some("total"));
            assert_eq!(
                bad(id, r#","prefillThroughput":"1e3""#),
                Some("prefillThroughput")
            );
            assert_eq!(bad(id, r#","sticky":null,"total":"x""#), Some("total"));
            // NaN as zap writes it is a number (a NaN threshold is out of
            // range, not no number).
            assert_eq!(bad(id, r#","total":4,"sticky":1"#), None);
            assert_eq!(bad(id, r#","tau":"NaN""#), Some("affinityThreshold"));
        }
    }

    /// A response body chunk line: its size and end of stream; a negative
    /// size is out of range, missing keys are none.
    #[test]
    fn response_body_chunk() {
        let u = used(
            r#"{"level":"debug","ts":1755786975.25,"caller":"handlers/response.go:52","msg":"HandleResponseBody is triggered","x-request-id":"req-0042","len(responseBytes)":179,"endOfStream":false}"#,
        );
        assert_eq!(u.meta.request_id.as_deref(), Some("req-0042"));
        assert_eq!(u.meta.ts, Some(1755786975.25));
        assert_eq!(
            u.event,
            Event::ResponseBody {
                bytes: Some(179.0),
                end_of_stream: Some(false),
            }
        );
        let u = used(
            r#"{"level":"debug","ts":1,"msg":"HandleResponseBody is triggered","x-request-id":"r"}"#,
        );
        assert_eq!(
            u.event,
            Event::ResponseBody {
                bytes: None,
                end_of_stream: None,
            }
        );
        assert!(matches!(
            classify(
                br#"{"level":"debug","ts":1,"msg":"HandleResponseBody is triggered","x-request-id":"r","len(responseBytes)":-1,"endOfStream":true}"#
            ),
            Class::Malformed(_, MalformedReason::OutOfRange("len(responseBytes)"))
        ));
    }

    /// A later `msg` member decides the line's message over zap's head
    /// (the last occurrence of a key wins), for the dump lines too.
    #[test]
    fn a_later_msg_member_decides() {
        let head = r#"{"level":"debug","ts":1755786974.5,"caller":"p.go:1","msg":"Request handled","x-request-id":"r1""#;
        assert_eq!(
            used(&format!("{head}}}")).event,
            Event::RequestHandled { endpoint: None }
        );
        assert_eq!(
            used(&format!(r#"{head},"msg":"EPP received request"}}"#)).event,
            Event::ReceivedRequest
        );
        assert!(matches!(
            classify(format!(r#"{head},"msg":"something else"}}"#).as_bytes()),
            Class::Ignored(LineShape::ZapJson)
        ));
        let dump = r#"{"level":"debug","ts":1755786974.5,"caller":"p.go:1","msg":"Before running filter plugins","x-request-id":"r1","msg":"EPP received request","endpoints":[{"ID":{"Namespace":"n","Name":"a"}}]}"#;
        assert_eq!(used(dump).event, Event::ReceivedRequest);
    }

    #[test]
    fn irrelevant_and_truncated() {
        assert!(matches!(
            classify(br#"{"level":"info","ts":1,"msg":"LLM request assembled","x":1}"#),
            Class::Ignored(LineShape::ZapJson)
        ));
        assert!(matches!(
            classify(br#"{"level":"info","ts":1,"msg":"LLM request assembled","x":"#),
            Class::Malformed(LineShape::ZapJson, _)
        ));
        assert!(matches!(
            classify(br#"{"level":"info","ts":1,"msg":"Request handled","x":"#),
            Class::Malformed(LineShape::ZapJson, MalformedReason::BadJson { .. })
        ));
        assert!(matches!(
            classify(br#"Request handled","x":1}"#),
            Class::Malformed(LineShape::Other, MalformedReason::JsonFragment)
        ));
    }

    #[test]
    fn other_shapes() {
        let c = |s: &str| match classify(s.as_bytes()) {
            Class::Ignored(s) => s,
            _ => panic!("{s}"),
        };
        assert_eq!(
            c(
                "I0821 14:36:14.123456       1 leaderelection.go:257] attempting to acquire leader lease"
            ),
            LineShape::Klog
        );
        assert_eq!(
            c("error: timed out waiting for the condition"),
            LineShape::KubectlError
        );
        assert_eq!(c("goroutine 1 [running]:"), LineShape::GoPanic);
        assert_eq!(c("\t/go/src/main.go:12 +0x1d"), LineShape::GoPanic);
        assert_eq!(
            c(
                "github.com/llm-d/llm-d-router/pkg/epp/scheduling.(*SchedulerProfile).Run(0xc000a1b2c0, {0x2c4e1f8, 0xc001234560})"
            ),
            LineShape::GoPanic
        );
        assert_eq!(
            c("INFO 08-21 14:36:14 [api_server.py:1] hello"),
            LineShape::Vllm
        );
        assert_eq!(c("hello world"), LineShape::Other);
        assert_eq!(
            c("2026-02-10T08:15:02Z\tDEBUG\tplugin.go:1\tsomething else\t{\"a\": 1}"),
            LineShape::Console
        );
    }

    #[test]
    fn console_filter_line() {
        let u = used(
            "2026-02-10T08:15:02Z\tLEVEL(-4)\tprefixcacheaffinity/plugin.go:208\tPrefixCacheAffinityFilter: narrowed to sticky\t{\"x-request-id\": \"r1\", \"affinityThreshold\": 0.8, \"sticky\": 1, \"total\": 4}",
        );
        assert_eq!(u.meta.v, Some(4));
        assert_eq!(u.meta.request_id.as_deref(), Some("r1"));
        let Event::Filter(l) = u.event else { panic!() };
        assert_eq!(l.sticky, Some(1.0));
        assert_eq!(l.total, Some(4.0));
    }
}
