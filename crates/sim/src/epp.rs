//! Rendering one scheduled request as the EPP's log lines, and its truth.

use gatecal_filter::{Decision, Outcome};

use crate::model::{DepState, EndpointInfo, FilterRun, ProfileRun, Request, Snapshot};
use crate::rng::Rng;
use crate::scenario::Deployment;
use crate::truth::{TruthCandidate, TruthRecord};
use crate::zap::{
    DirectorCtx, Encoding, ZapLine, epoch_float, json_str, rfc3339_nano_trimmed, zap_float,
};

/// One rendered line with its times.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Line {
    /// Order in which the line reaches the output (ts plus a write delay).
    pub sort_ns: i64,
    /// Sequence number for ties.
    pub seq: u64,
    /// Deployment index (which EPP pod wrote it, with `replica`).
    pub dep: usize,
    /// The `ts` in the line.
    pub ts_ns: i64,
    /// The JSON text, without newline.
    pub text: String,
    /// The deployment's EPP replica that wrote it ([`Deployment::epp_pods`]).
    pub replica: usize,
}

const SP: &str = "scheduling/scheduler_profile.go";
const SCHED: &str = "scheduling/scheduler.go";
const FILTER_TYPE: &str = "prefix-cache-affinity-filter";
const SCORER: &str = "token-load-scorer/token-load-scorer";
const PICKER: &str = "max-score-picker/max-score-picker";
const PREFIX_SCORER: &str = "prefix-cache-scorer/prefix-cache-scorer";

/// The encoding/json rendering of a `*endpoint` in the reflected dumps.
pub fn endpoint_json(info: &EndpointInfo, snap: &Snapshot, block_size: i64) -> String {
    let mut labels = String::from("{");
    for (i, (k, v)) in info.labels.iter().enumerate() {
        if i > 0 {
            labels.push(',');
        }
        labels.push_str(&json_str(k));
        labels.push(':');
        labels.push_str(&json_str(v));
    }
    labels.push('}');
    format!(
        "{{\"ID\":{{\"Namespace\":{},\"Name\":{}}},\"Name\":{},\"Address\":{},\"NodeAddress\":{},\"Port\":\"{}\",\"MetricsHost\":\"{}:{}\",\"Labels\":{},\"RankIndex\":{},\"ActiveModels\":{{}},\"WaitingModels\":{{}},\"MaxActiveModels\":0,\"RunningRequestsSize\":{},\"WaitingQueueSize\":{},\"KVCacheUsagePercent\":{},\"KvCacheMaxTokenCapacity\":0,\"CacheBlockSize\":{},\"CacheNumBlocks\":0,\"UpdateTime\":\"{}\",\"AttributeMap\":{{}}}}",
        json_str(&info.namespace),
        json_str(&info.name),
        json_str(&info.pod),
        json_str(&info.ip),
        json_str(&info.node_ip),
        info.port,
        info.ip,
        info.port,
        labels,
        info.rank,
        snap.running.max(0),
        snap.waiting.max(0),
        zap_float(snap.kv_usage),
        block_size,
        rfc3339_nano_trimmed(snap.scraped_ns),
    )
}

fn id_object(info: &EndpointInfo) -> String {
    format!(
        "{{\"name\":{},\"namespace\":{}}}",
        json_str(&info.name),
        json_str(&info.namespace)
    )
}

struct Writer<'a> {
    enc: Encoding,
    dep: usize,
    replica: usize,
    t: i64,
    rng: &'a mut Rng,
    seq: &'a mut u64,
    out: &'a mut Vec<Line>,
    /// One request's lines come from one goroutine: keep their order.
    last_sort: i64,
}

impl Writer<'_> {
    fn tick(&mut self, lo_us: u64, hi_us: u64) -> i64 {
        self.t += ((lo_us + self.rng.below(hi_us.saturating_sub(lo_us) + 1)) * 1000) as i64;
        self.t
    }

    fn start(&mut self, v: u8, caller: &str, msg: &str) -> ZapLine {
        self.tick(8, 120);
        ZapLine::new(self.enc, v, self.t, caller, msg)
    }

    fn push(&mut self, line: ZapLine) {
        self.push_at(self.t, line);
    }

    /// One `Calculated score` line: scorer `plugin`'s raw score of the
    /// endpoint `info`.
    fn score(
        &mut self,
        (rid, d): (&str, Option<&DirectorCtx<'_>>),
        plugin: &str,
        info: &EndpointInfo,
        score: f64,
    ) {
        let l = self
            .start(4, &format!("{SP}:251"), "Calculated score")
            .ctx(rid, d)
            .str("plugin", plugin)
            .raw("endpoint", &id_object(info))
            .float("score", score);
        self.push(l);
    }

    fn push_at(&mut self, ts: i64, line: ZapLine) {
        *self.seq += 1;
        let jitter = self.rng.below(60_000) as i64;
        let sort_ns = (ts + jitter).max(self.last_sort + 1);
        self.last_sort = sort_ns;
        self.out.push(Line {
            sort_ns,
            seq: *self.seq,
            dep: self.dep,
            ts_ns: ts,
            text: line.finish(),
            replica: self.replica,
        });
    }
}

/// The approximate prefix producer's block floor: blocks of at least this
/// many tokens are taken as its (smaller ones as the precise producer's).
const APPROX_MIN_BLOCK_TOKENS: i64 = 64;

/// What the prefix producers log at `-v=5` for a request, before its
/// profiles: with 64-token blocks the approximate producer's `Found cached
/// servers`, one line per block of the longest prefix a candidate holds;
/// else the precise producer's `Produce completed` with each candidate's
/// match blocks by address.
fn producer_lines(
    w: &mut Writer<'_>,
    dep: &Deployment,
    st: &DepState,
    req: &Request,
    rid: &str,
    d: Option<&DirectorCtx<'_>>,
) {
    let Some(run) = req.runs.first() else { return };
    let total = run
        .cands
        .iter()
        .filter_map(|c| c.total_blocks)
        .max()
        .unwrap_or(0);
    if dep.block_size >= APPROX_MIN_BLOCK_TOKENS {
        let longest = run
            .cands
            .iter()
            .filter_map(|c| c.match_blocks)
            .max()
            .unwrap_or(0);
        for _ in 0..longest {
            let l = w
                .start(5, "approximateprefix/plugin.go:326", "Found cached servers")
                .ctx(rid, d)
                .str(
                    "cachedServersError",
                    "json: unsupported type: map[approximateprefix.ServerID]struct {}",
                )
                .int("total # blocks", total);
            w.push(l);
        }
    } else {
        let pool = &st.pools[run.pool];
        let scores: Vec<String> = run
            .cands
            .iter()
            .enumerate()
            .map(|(p, c)| {
                let info = &pool.endpoints[run.order[p]];
                format!(
                    "{}:{}",
                    json_str(&format!("{}:{}", info.ip, info.port)),
                    c.match_blocks.unwrap_or(0)
                )
            })
            .collect();
        let l = w
            .start(5, "preciseprefixcache/producer.go:411", "Produce completed")
            .ctx(rid, d)
            .int("blockKeys", total)
            .raw("scores", &format!("{{{}}}", scores.join(",")));
        w.push(l);
    }
}

/// Renders a request's lines into `out` and its decisions into `truth`.
#[allow(clippy::too_many_arguments)]
pub fn render(
    dep: &Deployment,
    st: &DepState,
    req: &Request,
    enc: Encoding,
    full_dumps: bool,
    producers_v5: bool,
    rng: &mut Rng,
    seq: &mut u64,
    out: &mut Vec<Line>,
    truth: &mut Vec<TruthRecord>,
) {
    let rid = req.request_id.as_str();
    let dctx = DirectorCtx {
        objective_key: &dep.objective_key,
        incoming_model: &dep.model,
        target_model: &dep.model,
        priority: dep.priority,
    };
    let d = Some(&dctx);
    let handler = if dep.pd.is_some() {
        "disagg-profile-handler/disagg-profile-handler"
    } else {
        "single-profile-handler/single-profile-handler"
    };
    let mut w = Writer {
        enc,
        dep: req.dep,
        replica: req.replica,
        t: req.arrival_ns,
        rng,
        seq,
        out,
        last_sort: i64::MIN / 2,
    };
    let l = ZapLine::new(
        enc,
        2,
        w.t,
        "handlers/server.go:451",
        "EPP received request",
    )
    .ctx(rid, None);
    w.push(l);
    w.tick(150, 900);
    let l = w
        .start(4, "requestcontrol/director.go:285", "LLM request assembled")
        .ctx(rid, d);
    w.push(l);
    w.tick(100, 600);
    if producers_v5 {
        producer_lines(&mut w, dep, st, req, rid, d);
    }

    for (k, run) in req.runs.iter().enumerate() {
        let profile = dep.pools[run.pool].profile.as_str();
        let l = w
            .start(
                3,
                &format!("{SCHED}:80"),
                "Running profile handler, Pick profiles",
            )
            .ctx(rid, d)
            .str("plugin", handler);
        w.push(l);
        if k == 1
            && let Some(pd) = req.pd
        {
            pd_line(&mut w, rid, d, pd.hit_tokens, pd.prompt_tokens);
        }
        let l = w
            .start(
                3,
                &format!("{SCHED}:86"),
                "Completed running profile handler Pick profiles successfully",
            )
            .ctx(rid, d)
            .str("plugin", handler)
            .raw("result", &format!("{{{}:{{}}}}", json_str(profile)));
        w.push(l);
        let l = w
            .start(3, &format!("{SCHED}:94"), "Running scheduler profile")
            .ctx(rid, d)
            .str("profile", profile);
        w.push(l);
        profile_lines(
            &mut w,
            dep,
            st,
            req,
            run,
            profile,
            rid,
            d,
            (full_dumps, producers_v5),
            truth,
        );
        let l = w
            .start(
                3,
                &format!("{SCHED}:108"),
                "Completed running scheduler profile successfully",
            )
            .ctx(rid, d)
            .str("profile", profile);
        w.push(l);
    }
    // The last Pick returns no profile (under P/D, after the decider declined).
    let l = w
        .start(
            3,
            &format!("{SCHED}:80"),
            "Running profile handler, Pick profiles",
        )
        .ctx(rid, d)
        .str("plugin", handler);
    w.push(l);
    if let Some(pd) = req.pd
        && !pd.disaggregate
    {
        pd_line(&mut w, rid, d, pd.hit_tokens, pd.prompt_tokens);
        let l = w
            .start(
                4,
                "disagg/prefix_based_pd_decider.go:159",
                "Non-cached suffix is smaller than threshold, using decode profile only",
            )
            .ctx(rid, d);
        w.push(l);
    }
    let l = w
        .start(
            3,
            &format!("{SCHED}:86"),
            "Completed running profile handler Pick profiles successfully",
        )
        .ctx(rid, d)
        .str("plugin", handler)
        .raw("result", "{}");
    w.push(l);
    let l = w
        .start(
            3,
            &format!("{SCHED}:123"),
            "Running profile handler, ProcessResults",
        )
        .ctx(rid, d)
        .str("plugin", handler);
    w.push(l);
    let l = w
        .start(
            3,
            &format!("{SCHED}:129"),
            "Completed running profile handler ProcessResults successfully",
        )
        .ctx(rid, d)
        .str("plugin", handler);
    w.push(l);
    if let Some(primary) = req.runs.first() {
        let info = &st.pools[primary.pool].endpoints[primary.order[primary.chosen]];
        w.tick(50, 400);
        let l = w
            .start(3, "requestcontrol/director.go:507", "Request handled")
            .ctx(rid, d)
            .str("objectiveKey", &dep.objective_key)
            .str("incomingModelName", &dep.model)
            .str("targetModel", &dep.model)
            .str("endpoint", &info.host_port());
        w.push(l);
    }
    w.tick(100, 900);
    let l = w
        .start(
            2,
            "handlers/server.go:746",
            "EPP sent request body response(s) to proxy",
        )
        .ctx(rid, None)
        .str("modelName", &dep.model)
        .str("targetModelName", &dep.model);
    w.push(l);
    // The response: the body's first chunk when the first token reaches
    // the EPP (after the request's own lines), its last at the end, then
    // the end of the response. A real streamed response logs one
    // `HandleResponseBody is triggered` per chunk; the ones between are
    // left out.
    let first = req.first_token_ns.max(w.t + 1_000);
    let l = ZapLine::new(enc, 4, first, RESPONSE_BODY_CALLER, RESPONSE_BODY_MSG)
        .ctx(rid, None)
        .int("len(responseBytes)", first_chunk_bytes(&dep.model))
        .boolean("endOfStream", false);
    w.push_at(first, l);
    let done = req.done_ns.max(first + 1_000_000);
    let l = ZapLine::new(enc, 4, done, RESPONSE_BODY_CALLER, RESPONSE_BODY_MSG)
        .ctx(rid, None)
        .int("len(responseBytes)", 14)
        .boolean("endOfStream", true);
    w.push_at(done, l);
    let l = ZapLine::new(
        enc,
        2,
        done,
        "handlers/server.go:769",
        "EPP sent response body back to proxy",
    )
    .ctx(rid, None);
    w.push_at(done, l);
}

/// The message the EPP logs at `-v=4` for each response body chunk.
const RESPONSE_BODY_MSG: &str = "HandleResponseBody is triggered";
const RESPONSE_BODY_CALLER: &str = "handlers/response.go:52";

/// Bytes of the first chunk of an OpenAI chat-completion stream: one
/// `data: {...}` event with the role and the first token.
fn first_chunk_bytes(model: &str) -> i64 {
    160 + model.len() as i64
}

fn pd_line(w: &mut Writer<'_>, rid: &str, d: Option<&DirectorCtx<'_>>, hit: i64, prompt: i64) {
    let l = w
        .start(
            4,
            "disagg/prefix_based_pd_decider.go:154",
            "Computed hit percentage for prefix cache",
        )
        .ctx(rid, d)
        .int("absolute hit prefix len (tokens)", hit)
        .int("prompt length (token)", prompt);
    w.push(l);
}

fn json_array(items: impl Iterator<Item = String>) -> String {
    let mut s = String::from("[");
    for (i, it) in items.enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&it);
    }
    s.push(']');
    s
}

#[allow(clippy::too_many_arguments)]
fn profile_lines(
    w: &mut Writer<'_>,
    dep: &Deployment,
    st: &DepState,
    req: &Request,
    run: &ProfileRun,
    profile: &str,
    rid: &str,
    d: Option<&DirectorCtx<'_>>,
    (full_dumps, producers_v5): (bool, bool),
    truth: &mut Vec<TruthRecord>,
) {
    let pool = &st.pools[run.pool];
    let spec = &dep.pools[run.pool];
    let info = |pos: usize| &pool.endpoints[run.order[pos]];
    let dumps: Vec<String> = (0..run.cands.len())
        .map(|p| endpoint_json(info(p), &run.snapshots[p], dep.block_size))
        .collect();
    if full_dumps {
        let l = w
            .start(4, &format!("{SP}:155"), "Before running filter plugins")
            .ctx(rid, d)
            .raw("endpoints", &json_array(dumps.iter().cloned()));
        w.push(l);
    }
    let mut remaining: Vec<usize> = (0..run.cands.len()).collect();
    for fr in &run.filters {
        let inst = &spec.filters[fr.instance];
        let plugin = format!("{}/{FILTER_TYPE}", inst.name);
        let l = w
            .start(3, &format!("{SP}:171"), "Running filter plugin")
            .ctx(rid, d)
            .str("plugin", &plugin);
        w.push(l);
        let filter_ts = w.tick(5, 60);
        if let Some((line, msg, keys)) =
            filter_line(&fr.decision, inst.config.affinity_threshold, fr.input.len())
        {
            let mut l = ZapLine::new(
                w.enc,
                4,
                filter_ts,
                &format!("prefixcacheaffinity/plugin.go:{line}"),
                msg,
            )
            .ctx(rid, d);
            for (k, v) in keys {
                l = match v {
                    Val::F(x) => l.float(k, x),
                    Val::I(x) => l.int(k, x),
                    Val::B(x) => l.boolean(k, x),
                };
            }
            w.push_at(filter_ts, l);
        }
        let l = w
            .start(
                4,
                &format!("{SP}:183"),
                "Completed running filter plugin successfully",
            )
            .ctx(rid, d)
            .str("plugin", &plugin)
            .raw(
                "endpoints",
                &json_array(fr.kept.iter().map(|&p| dumps[p].clone())),
            );
        w.push(l);
        truth.push(truth_record(
            dep,
            st,
            req,
            run,
            profile,
            &inst.name,
            &inst.config,
            fr,
            filter_ts,
        ));
        remaining = fr.kept.clone();
    }
    let l = w
        .start(3, &format!("{SP}:196"), "Completed running filter plugins")
        .ctx(rid, d)
        .int("remainingEndpoints", remaining.len() as i64);
    w.push(l);
    if full_dumps {
        let l = w
            .start(4, &format!("{SP}:215"), "Before running scorer plugins")
            .ctx(rid, d)
            .raw(
                "endpoints",
                &json_array(remaining.iter().map(|&p| dumps[p].clone())),
            );
        w.push(l);
    }
    let l = w
        .start(3, &format!("{SP}:246"), "Running scorer plugin")
        .ctx(rid, d)
        .str("plugin", SCORER);
    w.push(l);
    // TokenLoadScorer logged at V(1) before 2026-07-19, V(4) after.
    let scorer_v = if w.enc == Encoding::Old { 1 } else { 4 };
    for &(p, load, score) in &run.scored {
        let l = w
            .start(
                scorer_v,
                "tokenload/token_load.go:126",
                "TokenLoadScorer scoring",
            )
            .ctx(rid, d)
            .str("endpoint", &info(p).ns_name())
            .float("tokenLoad", load)
            .float("score", score);
        w.push(l);
    }
    // Go map iteration order.
    let mut map_order: Vec<usize> = (0..run.scored.len()).collect();
    w.rng.shuffle(&mut map_order);
    for &i in &map_order {
        let (p, _, score) = run.scored[i];
        w.score((rid, d), SCORER, info(p), score);
    }
    // A prefix scorer in the profile runs after the token-load scorer:
    // its own lines, whatever the verbosity of the producers.
    if spec.prefix_scorer_weight > 0.0 {
        let l = w
            .start(3, &format!("{SP}:246"), "Running scorer plugin")
            .ctx(rid, d)
            .str("plugin", PREFIX_SCORER);
        w.push(l);
        w.rng.shuffle(&mut map_order);
        for &i in &map_order {
            let (p, _, _) = run.scored[i];
            w.score(
                (rid, d),
                PREFIX_SCORER,
                info(p),
                run.cands[p].prefix_score(),
            );
        }
        let l = w
            .start(
                4,
                &format!("{SP}:256"),
                "Completed running scorer plugin successfully",
            )
            .ctx(rid, d)
            .str("plugin", PREFIX_SCORER);
        w.push(l);
    }
    // With the approximate producer, the prefix scorer: match over total
    // blocks of each scored endpoint.
    if producers_v5 && dep.block_size >= APPROX_MIN_BLOCK_TOKENS && spec.prefix_scorer_weight <= 0.0
    {
        for &i in &map_order {
            let (p, _, _) = run.scored[i];
            let c = &run.cands[p];
            let score = match (c.match_blocks, c.total_blocks) {
                (Some(m), Some(t)) if t > 0 => m as f64 / t as f64,
                _ => 0.0,
            };
            w.score(
                (rid, d),
                "prefix-cache-scorer/prefix-cache-scorer",
                info(p),
                score,
            );
        }
    }
    let l = w
        .start(
            4,
            &format!("{SP}:256"),
            "Completed running scorer plugin successfully",
        )
        .ctx(rid, d)
        .str("plugin", SCORER);
    w.push(l);
    let l = w
        .start(
            3,
            &format!("{SP}:260"),
            "Completed running scorer plugins successfully",
        )
        .ctx(rid, d);
    w.push(l);
    let l = w
        .start(3, &format!("{SP}:357"), "Running picker plugin")
        .ctx(rid, d)
        .str("plugin", PICKER);
    w.push(l);
    w.rng.shuffle(&mut map_order);
    let weighted = json_array(map_order.iter().map(|&i| {
        let (p, _, _) = run.scored[i];
        format!(
            "{{\"Endpoint\":{},\"Score\":{}}}",
            dumps[p],
            zap_float(run.weighted[i])
        )
    }));
    let l = w
        .start(4, &format!("{SP}:360"), "Candidate pods for picking")
        .ctx(rid, d)
        .raw("endpoints-weighted-score", &weighted);
    w.push(l);
    let l = w
        .start(
            4,
            "maxscore/picker.go:88",
            "Selecting endpoints from candidates sorted by max score",
        )
        .ctx(rid, d)
        .int("max-num-of-endpoints", 1)
        .int("num-of-candidates", run.scored.len() as i64)
        .raw("scored-endpoints", &weighted);
    w.push(l);
    let l = w
        .start(
            4,
            &format!("{SP}:388"),
            "Completed running picker plugin successfully",
        )
        .ctx(rid, d)
        .str("plugin", PICKER)
        .raw(
            "result",
            &format!(
                "{{\"TargetEndpoints\":[{}],\"ScoredCandidates\":null}}",
                dumps[run.chosen]
            ),
        );
    w.push(l);
}

enum Val {
    F(f64),
    I(i64),
    B(bool),
}

type FilterLine = (u32, &'static str, Vec<(&'static str, Val)>);

/// The filter's own line for a decision: caller line, message and keys
/// (after the context), or `None` for `not_applicable`.
fn filter_line(d: &Decision, threshold: f64, total: usize) -> Option<FilterLine> {
    let total = total as i64;
    let f = match d.outcome {
        Outcome::NotApplicable => return None,
        Outcome::Exploration => (
            174,
            "PrefixCacheAffinityFilter: exploration skip, keeping all",
            vec![
                ("affinityThreshold", Val::F(threshold)),
                ("total", Val::I(total)),
            ],
        ),
        Outcome::NoMatch => (
            191,
            "PrefixCacheAffinityFilter: no sticky endpoints",
            vec![
                ("affinityThreshold", Val::F(threshold)),
                ("total", Val::I(total)),
            ],
        ),
        Outcome::LoadOverride => {
            let g = d.gate?;
            (
                201,
                "PrefixCacheAffinityFilter: TTFT load gate broken",
                vec![
                    ("bestStickyTTFT", Val::F(g.best_sticky.ttft_ms)),
                    ("bestNonStickyTTFT", Val::F(g.best_non_sticky.ttft_ms)),
                    ("penalty", Val::F(g.gate_input_ms)),
                    ("maxPenalty", Val::F(g.bar_ms)),
                ],
            )
        }
        Outcome::MissingSignal => {
            let s = d.signal?;
            (
                226,
                "PrefixCacheAffinityFilter: TTFT load gate skipped, missing signal",
                vec![
                    ("stickyObserved", Val::B(s.sticky_observed)),
                    ("nonStickyObserved", Val::B(s.non_sticky_observed)),
                ],
            )
        }
        Outcome::Sticky => (
            208,
            "PrefixCacheAffinityFilter: narrowed to sticky",
            vec![
                ("affinityThreshold", Val::F(threshold)),
                ("sticky", Val::I(d.sticky.len() as i64)),
                ("total", Val::I(total)),
            ],
        ),
        Outcome::RequestLoadOverride => {
            let r = d.request_gate.as_ref()?;
            (
                252,
                "PrefixCacheAffinityFilter: in-flight request gate broken",
                vec![
                    ("stickyRequests", Val::I(r.sticky_requests)),
                    ("nonStickyRequests", Val::I(r.within_requests)),
                    ("maxDelta", Val::I(0)),
                    ("added", Val::I(r.within.len() as i64)),
                ],
            )
        }
    };
    Some(f)
}

#[allow(clippy::too_many_arguments)]
fn truth_record(
    dep: &Deployment,
    st: &DepState,
    req: &Request,
    run: &ProfileRun,
    profile: &str,
    filter: &str,
    config: &gatecal_filter::Config,
    fr: &FilterRun,
    ts_ns: i64,
) -> TruthRecord {
    let pool = &st.pools[run.pool];
    let d = &fr.decision;
    let applicable = d.outcome != Outcome::NotApplicable;
    let (sticky, non): (Vec<usize>, Vec<usize>) = fr
        .input
        .iter()
        .copied()
        .partition(|&p| run.cands[p].prefix_score() >= config.affinity_threshold);
    let fewest = |side: &[usize]| -> Option<usize> {
        let mut best: Option<usize> = None;
        for &p in side {
            if best.is_none_or(|b| run.true_in_flight[p] < run.true_in_flight[b]) {
                best = Some(p);
            }
        }
        best
    };
    let (bs, bn) = match d.gate {
        Some(g) => (
            Some(fr.input[g.best_sticky.index]),
            Some(fr.input[g.best_non_sticky.index]),
        ),
        None => (fewest(&sticky), fewest(&non)),
    };
    let bs = if applicable { bs } else { None };
    let bn = if bs.is_some() { bn } else { None };
    TruthRecord {
        v: 1,
        ts: epoch_float(ts_ns),
        deployment: dep.name.clone(),
        request_id: req.request_id.clone(),
        profile: profile.to_string(),
        filter: filter.to_string(),
        outcome: d.outcome.as_str().to_string(),
        logged_penalty_ms: match d.outcome {
            Outcome::LoadOverride => d.gate.map(|g| g.gate_input_ms),
            _ => None,
        },
        candidates: fr
            .input
            .iter()
            .map(|&p| TruthCandidate::from_candidate(&run.cands[p]))
            .collect(),
        truth_gate_input_ms: d.gate.map(|g| g.gate_input_ms),
        truth_best_sticky_in_flight: bs.map(|p| run.true_in_flight[p]),
        truth_best_non_sticky_in_flight: bn.map(|p| run.true_in_flight[p]),
        truth_matched_tokens: bs.map(|p| run.cands[p].matched_tokens()),
        prompt_tokens: req.prompt_tokens,
        epp_pod: if req.replica == 0 {
            dep.epp_pod.clone()
        } else {
            dep.epp_pods()
                .get(req.replica)
                .cloned()
                .unwrap_or_else(|| dep.epp_pod.clone())
        },
        chosen_endpoint: pool.endpoints[run.order[run.chosen]].ns_name(),
        ttft_ms: (req.first_token_ns - req.arrival_ns) as f64 / 1e6,
        arrival_ts: epoch_float(req.arrival_ns),
        output_tokens: req.output_tokens,
        session_id: req.session,
        session_turn: req.turn,
        think_time_ms: req.think_ns.map(|ns| ns as f64 / 1e6),
    }
}
