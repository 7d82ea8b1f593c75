//! What a replay's filter decided from, decision by decision: each
//! decision's candidates as the filter saw them and the endpoints it kept.
//! Another config decided again on the same candidates tells whether its
//! replay would be the same run.
//!
//! A replay's state moves only with what its filter keeps: the picker
//! chooses among the kept endpoints, the anchored replay follows the log
//! while the kept endpoints are the config in force's, and the engines
//! serve what was picked. A config whose filter keeps, at every decision of
//! the traced replay (the decode profile's and the prefill pool's), the
//! endpoints the traced config kept, and whose gate reads the same TTFT
//! source (so the candidates are the same), therefore replays the very same
//! run: the same endpoints, first tokens and caches, request by request.
//! Only the outcome it gives each decision (held, released, ...) may
//! differ, and that is its own decision on the same candidates.
//! [`Trace::replay_as`] gives that run without serving a request again: a
//! filter decision a request instead of the whole replay's step.

use gatecal_filter::{Candidate, Config, decide};

use super::Replay;

/// Most candidates the traces of one deployment's predictions hold
/// together (24 bytes each, 3 MiB in all): a longer replay is not traced,
/// and every config is replayed in full.
pub(crate) const MAX_TRACE_CANDIDATES: usize = 1 << 17;

/// The attributes the replay sets on a candidate that differ between
/// endpoints (the prompt's blocks and their size are the request's), each
/// absent one as 0: which are present is the decision's
/// ([`Step::present`]).
#[derive(Clone, Copy, Debug)]
struct Attrs {
    in_flight_tokens: i64,
    predicted_ttft_ms: f64,
    match_blocks: i32,
    in_flight_requests: i32,
}

/// [`Step::present`]'s bits: which of the candidates' attributes are set.
const MATCH: u8 = 1;
const TOKENS: u8 = 2;
const REQUESTS: u8 = 4;
const PREDICTED: u8 = 8;

/// Which attributes `c` has, as [`Step::present`]'s bits.
fn present(c: &Candidate) -> u8 {
    let bit = |set: bool, b: u8| if set { b } else { 0 };
    bit(c.match_blocks.is_some(), MATCH)
        | bit(c.in_flight_tokens.is_some(), TOKENS)
        | bit(c.in_flight_requests.is_some(), REQUESTS)
        | bit(c.predicted_ttft_ms.is_some(), PREDICTED)
}

/// One decision of the traced replay.
#[derive(Clone, Copy, Debug)]
struct Step {
    /// The request decided (its index in the replayed requests).
    request: usize,
    /// A decision of the prefill pool (P/D), not the decode profile's.
    pool: bool,
    /// Its candidates.
    n: usize,
    /// Which attributes every candidate of the decision has (the replay
    /// sets the same on each, and the same prompt's blocks: a decision
    /// whose candidates differ there cuts the trace).
    present: u8,
    /// The request's draw, as the filter got it.
    draw: f64,
    total_blocks: Option<i64>,
    block_size_tokens: Option<i64>,
    /// End of this decision's kept endpoints in [`Trace::kept`] (the
    /// previous decision's end is their start).
    kept_end: usize,
}

/// The decisions of one replay, in the order the replay made them.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    steps: Vec<Step>,
    /// Each decision's candidates' attributes, in endpoint order: the
    /// decode endpoints for a decode decision, the pool's for a pool one.
    attrs: Vec<Attrs>,
    kept: Vec<usize>,
    /// Candidates it may still take; none left, it stops tracing.
    room: usize,
    /// Whether a decision was left out for want of room: the trace is then
    /// of no use.
    cut: bool,
}

impl Trace {
    /// An empty trace of at most `room` candidates.
    pub(crate) fn with_room(room: usize) -> Trace {
        Trace {
            room,
            ..Trace::default()
        }
    }

    /// The candidates it holds.
    pub(crate) fn len(&self) -> usize {
        self.attrs.len()
    }

    /// Records one decision: `request`'s filter kept `kept` of `cands`
    /// (the pool's candidates when `pool`), with the draw `draw`.
    pub(super) fn record(
        &mut self,
        request: usize,
        pool: bool,
        draw: f64,
        cands: &[Candidate],
        kept: &[usize],
    ) {
        if self.cut {
            return;
        }
        let first = cands.first();
        let bits = first.map_or(0, present);
        // A candidate as the compact form holds it: `None` when its
        // attributes are not those of the decision's first candidate, or
        // too large for it.
        let compact = |c: &Candidate| {
            let alike = present(c) == bits
                && first.is_some_and(|f| {
                    f.total_blocks == c.total_blocks && f.block_size_tokens == c.block_size_tokens
                });
            alike.then_some(())?;
            Some(Attrs {
                in_flight_tokens: c.in_flight_tokens.unwrap_or(0),
                predicted_ttft_ms: c.predicted_ttft_ms.unwrap_or(0.0),
                match_blocks: i32::try_from(c.match_blocks.unwrap_or(0)).ok()?,
                in_flight_requests: i32::try_from(c.in_flight_requests.unwrap_or(0)).ok()?,
            })
        };
        if cands.len() > self.room {
            return self.cut_off();
        }
        for c in cands {
            let Some(a) = compact(c) else {
                return self.cut_off();
            };
            self.attrs.push(a);
        }
        self.room -= cands.len();
        self.kept.extend_from_slice(kept);
        self.steps.push(Step {
            request,
            pool,
            n: cands.len(),
            present: bits,
            draw,
            total_blocks: first.and_then(|c| c.total_blocks),
            block_size_tokens: first.and_then(|c| c.block_size_tokens),
            kept_end: self.kept.len(),
        });
    }

    /// Stops tracing: out of room, or attributes the compact form does not
    /// hold. The trace is of no use now, and its memory goes at once.
    fn cut_off(&mut self) {
        *self = Trace {
            cut: true,
            ..Trace::default()
        };
    }

    /// The replay of `config` on the traced replay's requests, `traced`
    /// being that replay's result: `None` unless `config` keeps, at every
    /// decision, what the traced config kept (or the trace is cut); then
    /// `traced` with each decode decision's outcome `config`'s own.
    ///
    /// `endpoints` and `pool` are the replay's decode endpoints and the
    /// prefill pool's; the candidates' ids are their indices, as the
    /// replay names them. The caller checks that `config` reads the
    /// traced config's TTFT source.
    pub(crate) fn replay_as(
        &self,
        config: &Config,
        traced: &Replay,
        endpoints: usize,
        pool: usize,
    ) -> Option<Replay> {
        if self.cut {
            return None;
        }
        let names = |n: usize| -> Vec<Candidate> {
            (0..n).map(|e| Candidate::new(e.to_string())).collect()
        };
        let mut main = names(endpoints);
        let mut pcands = names(pool);
        let mut out = traced.clone();
        let (mut at, mut kept_at) = (0, 0);
        for s in &self.steps {
            let cands = if s.pool { &mut pcands } else { &mut main };
            if s.n != cands.len() {
                // Not the endpoints the traced replay had.
                return None;
            }
            let attrs = self.attrs.get(at..at + s.n)?;
            at += s.n;
            let has = |bit: u8| s.present & bit != 0;
            for (c, a) in cands.iter_mut().zip(attrs) {
                c.match_blocks = has(MATCH).then_some(i64::from(a.match_blocks));
                c.total_blocks = s.total_blocks;
                c.block_size_tokens = s.block_size_tokens;
                c.in_flight_tokens = has(TOKENS).then_some(a.in_flight_tokens);
                c.in_flight_requests = has(REQUESTS).then_some(i64::from(a.in_flight_requests));
                c.predicted_ttft_ms = has(PREDICTED).then_some(a.predicted_ttft_ms);
            }
            let d = decide(config, cands, s.draw);
            let kept = self.kept.get(kept_at..s.kept_end)?;
            kept_at = s.kept_end;
            if d.kept != kept {
                return None;
            }
            if !s.pool
                && let Some(Some(served)) = out.served.get_mut(s.request)
            {
                served.outcome = d.outcome;
                served.released = d.outcome.is_release();
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Candidates the compact form cannot hold (attributes set on some
    /// and not others, a count past `i32`) cut the trace, which is then of
    /// no use; candidates it holds are traced.
    #[test]
    fn candidates_the_compact_form_cannot_hold_cut_the_trace() {
        let c = |m: i64| {
            Candidate::new("0")
                .with_match(m, 10, 16)
                .with_in_flight_tokens(5)
        };
        let mut ok = Trace::with_room(100);
        ok.record(0, false, 0.5, &[c(1), c(2)], &[0]);
        assert_eq!(ok.len(), 2);
        assert!(!ok.cut);
        for cands in [
            vec![c(1), Candidate::new("1")],
            vec![c(1), c(i64::from(i32::MAX) + 1)],
            vec![c(1), c(2).with_predicted_ttft_ms(3.0)],
        ] {
            let mut t = Trace::with_room(100);
            t.record(0, false, 0.5, &[c(1), c(1)], &[0, 1]);
            t.record(1, false, 0.5, &cands, &[0]);
            assert!(t.cut, "{cands:?}");
            assert_eq!(t.len(), 0);
            let cfg = Config::default();
            assert!(t.replay_as(&cfg, &Replay::default(), 2, 0).is_none());
        }
    }
}
