//! From the parser's assembled [`Decision`] to the analysis' [`DecisionInput`].

use gatecal_parser::{Completion, Decision, FilterMsg, GatePenalty};

use crate::input::{
    DEFAULT_APPROXIMATE_BLOCK_SIZE, DEFAULT_PRECISE_BLOCK_SIZE, DecisionInput, LoggedGate,
    MatchedSource, PickedMatch, ScoredEndpoint,
};

/// Whether a scorer plugin (`name/type`) scores prefix-cache matches: its
/// type (after the last `/`) contains `prefix` and not `affinity`.
fn is_prefix_scorer(plugin: &str) -> bool {
    let b = plugin.as_bytes();
    let t = match b.iter().rposition(|&c| c == b'/') {
        Some(i) => &b[i + 1..],
        None => b,
    };
    contains(t, b"prefix") && !contains(t, b"affinity")
}

/// `needle` occurs in `hay` (a plain window scan: plugin names are short,
/// and the general substring searcher's setup costs more than the scan).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Builds that log every candidate's in-flight tokens (P2251's `calculated
/// endpoint TTFT`) make a narrowed or no-match decision exact: the
/// survivors of a narrowed decision are the sticky set, and no candidate of a
/// no-match decision is sticky. Match info is not logged, so stickiness is
/// written as a 1/1 or 0/1 match without block size (matched tokens unknown).
fn per_endpoint_loads(d: &Decision) -> Option<Vec<gatecal_filter::Candidate>> {
    use gatecal_filter::{Candidate, Outcome};
    if d.candidates.len() < 2 || d.candidates.iter().any(|c| c.in_flight_tokens.is_none()) {
        return None;
    }
    let sticky = |ep: &str| match (d.outcome, &d.survivors) {
        (Some(Outcome::Sticky), Some(s)) => Some(s.iter().any(|x| x == ep)),
        (Some(Outcome::NoMatch), _) => Some(false),
        _ => None,
    };
    d.candidates
        .iter()
        .map(|c| {
            let hit = sticky(&c.endpoint)?;
            Some(Candidate {
                id: c.endpoint.to_string(),
                match_blocks: Some(i64::from(hit)),
                total_blocks: Some(1),
                in_flight_tokens: c.in_flight_tokens,
                in_flight_requests: c.in_flight_requests,
                ..Candidate::default()
            })
        })
        .collect()
}

/// The precise producer's matched blocks: the most match blocks of any
/// endpoint (`Produce completed`'s `scores`, whole blocks). The best
/// sticky endpoint's own count is not logged by endpoint name (the scores
/// are keyed by address): exact when one endpoint is sticky, else at most
/// `(1 − affinityThreshold) × blockKeys` blocks above it.
fn precise_matched(p: &gatecal_parser::PrefixProducers) -> Option<i64> {
    let m = p.precise_max_match_blocks?.floor() as i64;
    (m > 0).then_some(m)
}

/// The approximate producer's matched blocks: the best surviving
/// endpoint's prefix score × `total # blocks` (the score is match blocks
/// over total blocks), else the longest cached prefix (its one `Found
/// cached servers` line per block, an upper bound exact when the best
/// sticky endpoint holds it).
fn approximate_matched(
    p: &gatecal_parser::PrefixProducers,
    best_score: Option<f64>,
) -> Option<i64> {
    if p.approx_cached_blocks == 0 {
        return None;
    }
    let blocks = match (best_score, p.approx_total_blocks) {
        (Some(s), Some(t)) if s.is_finite() && s >= 0.0 => (s * t).round() as i64,
        _ => i64::from(p.approx_cached_blocks),
    };
    (blocks > 0).then_some(blocks)
}

/// The prefix match of the endpoint the request was sent to, from the
/// producers' lines: the precise producer's `scores` entry of the address
/// that handled it (whole blocks), else the prefix scorer's score of the
/// endpoint picked × the approximate producer's `total # blocks`. Block
/// sizes are the upstream defaults until the ones in force are set.
fn picked_match(
    chosen: Option<&str>,
    scored: &[ScoredEndpoint],
    p: &gatecal_parser::PrefixProducers,
) -> Option<PickedMatch> {
    let whole = |x: f64| (x.is_finite() && x >= 0.0).then(|| x.floor() as i64);
    if let (Some(m), Some(t)) = (p.precise_handled_match_blocks, p.precise_total_blocks) {
        let (m, t) = (whole(m)?, whole(t)?);
        return (t > 0).then_some(PickedMatch {
            source: MatchedSource::PreciseProducer,
            match_blocks: m.min(t),
            total_blocks: t,
            block_size: DEFAULT_PRECISE_BLOCK_SIZE,
        });
    }
    let t = whole(p.approx_total_blocks?)?;
    let first = chosen?.split(',').next()?.trim();
    let score = scored
        .iter()
        .find(|e| e.endpoint == first)?
        .prefix_score
        .filter(|s| s.is_finite() && (0.0..=1.0).contains(s))?;
    (t > 0).then(|| PickedMatch {
        source: MatchedSource::ApproximateProducer,
        match_blocks: (score * t as f64).round() as i64,
        total_blocks: t,
        block_size: DEFAULT_APPROXIMATE_BLOCK_SIZE,
    })
}

/// A record's `picked_match`, read back (its source a records' one, so no
/// block size in force is applied again); `None` when a value is out of
/// domain.
fn read_back(w: &gatecal_parser::PickedMatchRecord) -> Option<PickedMatch> {
    let ok = w.total_blocks > 0
        && w.block_size_tokens > 0
        && (0..=w.total_blocks).contains(&w.match_blocks);
    ok.then(|| PickedMatch {
        source: MatchedSource::read_back(Some(&w.source)),
        match_blocks: w.match_blocks,
        total_blocks: w.total_blocks,
        block_size: w.block_size_tokens,
    })
}

impl From<&Decision> for DecisionInput {
    fn from(d: &Decision) -> DecisionInput {
        DecisionInput::from(d.clone())
    }
}

/// By value: the decision's strings move into the input (the pipeline's
/// path, one decision at a time).
impl From<Decision> for DecisionInput {
    fn from(d: Decision) -> DecisionInput {
        let logged_gate = match d.message {
            FilterMsg::TtftGateBroken => d.logged_penalty_ms().map(|p| LoggedGate {
                best_sticky_ttft_ms: d.best_sticky_ttft_ms,
                best_non_sticky_ttft_ms: d.best_non_sticky_ttft_ms,
                penalty_ms: p,
                max_penalty_ms: d.max_penalty.and_then(GatePenalty::ms),
            }),
            _ => None,
        };
        // Exact when every candidate carries its match info and its load
        // (decision records, or builds that log both). A record without
        // match info cannot be replayed: its gate input is unknown.
        let exact_ok = !d.candidates.is_empty()
            && d.candidates.iter().all(|c| {
                c.total_blocks.is_some()
                    && c.match_blocks.is_some()
                    && (d.completion == Completion::Record
                        || c.in_flight_tokens.is_some()
                        || c.predicted_ttft_ms.is_some())
            });
        let exact = if exact_ok {
            Some(d.candidates.iter().map(|c| c.to_candidate()).collect())
        } else {
            per_endpoint_loads(&d)
        };
        let prompt = d.prompt_tokens.map(|p| p.round() as i64);
        // The config in force, where the line shows it (finite, in range).
        let affinity_threshold = d
            .affinity_threshold
            .filter(|t| t.is_finite() && (0.0..=1.0).contains(t));
        let prefill_throughput = d
            .extras()
            .prefill_throughput
            .or(d.startup_peak)
            .filter(|p| p.is_finite() && *p > 0.0);
        let traced = d.traced.then_some(crate::input::TracedGate {
            penalty_ms: d.traced_penalty_ms,
            joined: d.completion != Completion::Traced,
        });
        let Decision {
            deployment,
            ts,
            request_id,
            profile,
            filter,
            outcome,
            sticky,
            total,
            survivors,
            candidates,
            chosen,
            hit_prefix_tokens,
            producers,
            recorded,
            arrival_ts,
            observed_ttft_ms,
            epp_pod,
            source,
            ..
        } = d;
        let unnamed_source = (epp_pod.is_none() && source.file != "-").then_some(source.file);
        // A vector of its own, of the size needed: collected from
        // `candidates` in place, it would keep their allocation (about three
        // times as large) for as long as the decision waits in the
        // analysis' buffers.
        let loaded = |c: &gatecal_parser::CandidateObs| {
            c.token_load.is_some() || c.in_flight_tokens.is_some()
        };
        let mut scored = Vec::with_capacity(candidates.iter().filter(|c| loaded(c)).count());
        scored.extend(candidates.into_iter().filter(|c| loaded(c)).map(|c| {
            ScoredEndpoint {
                prefix_score: c
                    .scores
                    .iter()
                    .find(|(p, _)| is_prefix_scorer(p))
                    .map(|(_, s)| *s),
                endpoint: c.endpoint,
                token_load: c.token_load,
                in_flight_tokens: c.in_flight_tokens,
            }
        }));
        // Matched tokens, from the first source the request's lines give.
        let best_score = scored
            .iter()
            .filter(|e| {
                survivors
                    .as_ref()
                    .is_none_or(|s| s.iter().any(|x| x == &e.endpoint))
            })
            .filter_map(|e| e.prefix_score)
            .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))));
        // The producers' matched blocks, in tokens at their upstream
        // default block sizes until the analysis sets the ones in force
        // ([`DecisionInput::set_producer_block_sizes`]).
        let precise = precise_matched(&producers);
        let approximate = approximate_matched(&producers, best_score);
        let (hit, matched_source) = [
            (
                hit_prefix_tokens.map(|h| h.round() as i64),
                MatchedSource::PdDecider,
            ),
            (
                precise.map(|b| b.saturating_mul(DEFAULT_PRECISE_BLOCK_SIZE)),
                MatchedSource::PreciseProducer,
            ),
            (
                approximate.map(|b| b.saturating_mul(DEFAULT_APPROXIMATE_BLOCK_SIZE)),
                MatchedSource::ApproximateProducer,
            ),
            (
                prompt
                    .zip(best_score)
                    .map(|(p, b)| (b * p as f64).round() as i64),
                MatchedSource::PrefixScorePrompt,
            ),
        ]
        .into_iter()
        .find_map(|(h, s)| Some((h?, s)))
        .map_or((None, None), |(h, s)| (Some(h), Some(s)));
        // Records read back carry it as written, at the block size then in
        // force.
        let picked_match = match recorded
            .as_ref()
            .and_then(|r| r.gate.as_ref())
            .map(|g| g.picked_match.as_ref())
        {
            Some(written) => written.and_then(read_back),
            None => picked_match(chosen.as_deref(), &scored, &producers),
        };
        let producer_match_blocks = match matched_source {
            Some(MatchedSource::PreciseProducer) => precise,
            Some(MatchedSource::ApproximateProducer) => approximate,
            _ => None,
        };
        DecisionInput {
            deployment,
            ts,
            request_id,
            profile,
            filter,
            outcome,
            logged_gate,
            sticky_count: sticky,
            total,
            survivors,
            scored,
            exact,
            chosen,
            prompt_tokens: prompt,
            hit_prefix_tokens: hit,
            recorded,
            record: None,
            affinity_threshold,
            prefill_throughput,
            traced,
            matched_source,
            producer_match_blocks,
            picked_match,
            arrival_ts: arrival_ts.filter(|t| t.is_finite()),
            observed_ttft_ms: observed_ttft_ms.filter(|t| t.is_finite() && *t >= 0.0),
            epp_pod,
            unnamed_source,
            peak_inferred: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_parser::{ParseOptions, parse_slice};

    fn producers(approx: (u32, Option<f64>), precise: Option<f64>) -> Decision {
        Decision {
            producers: gatecal_parser::PrefixProducers {
                approx_cached_blocks: approx.0,
                approx_total_blocks: approx.1,
                precise_total_blocks: precise.map(|_| 50.0),
                precise_max_match_blocks: precise,
                precise_handled_match_blocks: None,
            },
            ..Decision::default()
        }
    }

    #[test]
    fn picked_endpoint_match_from_the_producers() {
        let scored = |ep: &str, score: f64| {
            let mut c = gatecal_parser::CandidateObs::new(ep);
            c.token_load = Some(100.0);
            c.scores = vec![("prefix-cache-scorer/prefix-cache-scorer".into(), score)];
            c
        };
        // Approximate: the picked endpoint's own score (0.25 × 8 blocks),
        // not the best one (0.75).
        let mut d = producers((6, Some(8.0)), None);
        d.candidates = vec![scored("llm/p-0", 0.75), scored("llm/p-1", 0.25)];
        d.chosen = Some("llm/p-1".into());
        let p = DecisionInput::from(d.clone()).picked_match.unwrap();
        assert_eq!(
            (p.source, p.match_blocks, p.total_blocks, p.block_size),
            (MatchedSource::ApproximateProducer, 2, 8, 64)
        );
        assert_eq!((p.matched_tokens(), p.prompt_tokens()), (128, 8 * 64 + 32));
        // The block size in force applies to it too.
        let mut sizes = crate::input::ProducerBlockSizes::default();
        sizes.approximate_producer.tokens = 128;
        let mut i = DecisionInput::from(d.clone());
        i.set_producer_block_sizes(&sizes);
        assert_eq!(i.picked_match.unwrap().matched_tokens(), 256);
        // No score for the endpoint picked (or none picked): unknown.
        d.chosen = Some("llm/p-9".into());
        assert_eq!(DecisionInput::from(d.clone()).picked_match, None);
        // Precise: the handled address's whole blocks, at most the prompt's.
        let mut d = producers((0, None), Some(45.9));
        d.producers.precise_handled_match_blocks = Some(30.7);
        let p = DecisionInput::from(d.clone()).picked_match.unwrap();
        assert_eq!(
            (p.source, p.match_blocks, p.total_blocks, p.block_size),
            (MatchedSource::PreciseProducer, 30, 50, 16)
        );
        d.producers.precise_handled_match_blocks = Some(80.0);
        assert_eq!(
            DecisionInput::from(d).picked_match.unwrap().match_blocks,
            50
        );
    }

    #[test]
    fn picked_match_read_back_checks_its_domain() {
        let w = |m: i64, t: i64, b: i64| gatecal_parser::PickedMatchRecord {
            match_blocks: m,
            total_blocks: t,
            block_size_tokens: b,
            source: "precise_producer".into(),
        };
        let p = read_back(&w(3, 10, 16)).unwrap();
        assert_eq!(p.source, MatchedSource::RecordsFromPreciseProducer);
        // A records' source: no block size in force applies again.
        let mut sizes = crate::input::ProducerBlockSizes::default();
        sizes.precise_producer.tokens = 64;
        let mut i = DecisionInput {
            picked_match: Some(p),
            ..DecisionInput::default()
        };
        i.set_producer_block_sizes(&sizes);
        assert_eq!(i.picked_match.unwrap().block_size, 16);
        for bad in [w(11, 10, 16), w(-1, 10, 16), w(3, 0, 16), w(3, 10, 0)] {
            assert_eq!(read_back(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn prefix_producers_give_matched_tokens_in_blocks() {
        let input = |d: Decision| {
            let i = DecisionInput::from(d);
            (i.hit_prefix_tokens, i.matched_source)
        };
        // Approximate, no prefix score: the longest prefix, 6 blocks of 64.
        assert_eq!(
            input(producers((6, Some(7.0)), None)),
            (Some(384), Some(MatchedSource::ApproximateProducer))
        );
        // With the prefix scorer's score of the surviving endpoint: 0.5 × 10.
        let mut d = producers((8, Some(10.0)), None);
        let mut c = gatecal_parser::CandidateObs::new("llm/p-0");
        c.token_load = Some(100.0);
        c.scores = vec![("prefix-cache-scorer/prefix-cache-scorer".into(), 0.5)];
        d.candidates = vec![c];
        assert_eq!(
            input(d.clone()),
            (Some(5 * 64), Some(MatchedSource::ApproximateProducer))
        );
        // The block size in force replaces the default: 5 blocks of 128.
        let mut sizes = crate::input::ProducerBlockSizes::default();
        sizes.approximate_producer.tokens = 128;
        sizes.precise_producer.tokens = 32;
        let mut i = DecisionInput::from(d.clone());
        assert_eq!(i.producer_match_blocks, Some(5));
        i.set_producer_block_sizes(&sizes);
        assert_eq!(i.hit_prefix_tokens, Some(5 * 128));
        // The precise producer's whole blocks win over the approximate one.
        d.producers.precise_total_blocks = Some(50.0);
        d.producers.precise_max_match_blocks = Some(45.9);
        assert_eq!(
            input(d.clone()),
            (Some(45 * 16), Some(MatchedSource::PreciseProducer))
        );
        let mut i = DecisionInput::from(d.clone());
        i.set_producer_block_sizes(&sizes);
        assert_eq!(i.hit_prefix_tokens, Some(45 * 32));
        // The P/D decider's exact tokens win over both.
        d.hit_prefix_tokens = Some(1408.0);
        assert_eq!(
            input(d.clone()),
            (Some(1408), Some(MatchedSource::PdDecider))
        );
        // ... and no producer block size touches them.
        let mut i = DecisionInput::from(d);
        assert_eq!(i.producer_match_blocks, None);
        i.set_producer_block_sizes(&sizes);
        assert_eq!(i.hit_prefix_tokens, Some(1408));
        // No match anywhere: no matched tokens.
        assert_eq!(input(producers((0, None), Some(0.0))), (None, None));
    }

    #[test]
    fn per_endpoint_ttft_builds_are_exact() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/edge/all_filter_versions.log"
        );
        let bytes = std::fs::read(path).unwrap();
        let parsed =
            parse_slice("all_filter_versions.log", &bytes, &ParseOptions::default()).unwrap();
        let d = parsed
            .decisions()
            .find(|d| d.request_id.as_deref() == Some("p2251"))
            .expect("the P2251 decision");
        let input = DecisionInput::from(d);
        let exact = input
            .exact
            .expect("every candidate's in-flight tokens are logged");
        assert!(exact.iter().all(|c| c.in_flight_tokens.is_some()));
        assert!(exact.iter().any(|c| c.in_flight_tokens == Some(64000)));
    }
}
