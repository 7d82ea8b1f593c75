//! The queue model of one engine: its first-come-first-served queue,
//! fitted to the EPP's routed requests and the engine's v1 lines (see the
//! module docs of `throughput`).

use super::types::{Line, Routed};

/// One engine's first-come-first-served queue, fitted to the EPP's routed
/// requests and the engine's v1 lines (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(super) struct Queue {
    /// Uncached tokens of the requests that waited (central fit).
    pub(super) tokens: f64,
    /// Their modelled prefill seconds (central fit).
    pub(super) secs: f64,
    /// The effective rate over every fit as consistent with the lines as
    /// the best one (one mismatched line more allowed).
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// Requests that waited (central fit).
    pub(super) waited: usize,
}

/// Per-request overheads (seconds) the queue model tries.
const QUEUE_OVERHEADS_S: [f64; 7] = [0.0, 0.02, 0.04, 0.06, 0.08, 0.12, 0.16];
/// Sub-second phases of the lines' times the queue model tries (vLLM's
/// log prefix has whole seconds: a line's interval ends up to 1 s after
/// its printed time).
const QUEUE_PHASES: usize = 10;
/// The queue model's 90 % interval is widened by this share each way: the
/// grid's resolution (1 % in rate, 20–40 ms in overhead).
pub const QUEUE_RESOLUTION: f64 = 0.02;
/// Fewest requests that waited, over a deployment's engines, for the
/// queue model to give the estimate.
pub const QUEUE_MIN_WAITED: usize = 20;

/// The queue model of one engine: `None` when the lines are not v1 with
/// their year, the decisions do not cover ten lines, or no fit matches
/// nine lines in ten (requests missing from the decisions, another
/// client, clocks apart).
///
/// vLLM schedules first come, first served; with `a_n` the EPP's decision
/// time of the engine's `n`-th request and `u_n` its uncached tokens
/// (prompt less the match), the prefill of request `n` completes at
/// `f_n = max(a_n, f_{n-1}) + o + u_n / r`: the engine idles exactly when
/// every request that arrived has completed. v1 counts each full prompt
/// in the line whose interval holds its completion, so each `(o, r)` and
/// phase of the lines predicts every line's prompt tokens; a line matches
/// when they agree to within half the smallest prompt and 1 %. The fits
/// with the fewest mismatched lines (one more allowed) give the
/// effective rate of the requests that waited (`a_n < f_{n-1}`),
/// `Σ u_n / Σ (o + u_n / r)`: busy time only, whatever the lines'
/// snapshots say.
pub(super) fn queue_model(
    lines: &[Line],
    counted: &[f64],
    cadence: f64,
    routed: &[Routed],
) -> Option<Queue> {
    if routed.len() < 10 || lines.iter().any(|l| !l.v1 || !l.absolute) {
        return None;
    }
    let (t0, t1) = (routed[0].ts, routed[routed.len() - 1].ts);
    // Lines whose intervals the decisions cover, the first one a base.
    let idx: Vec<usize> = (0..lines.len())
        .filter(|&k| {
            lines[k]
                .ts
                .is_some_and(|t| t > t0 + 2.0 * cadence && t < t1)
        })
        .collect();
    if idx.len() < 10 {
        return None;
    }
    let times: Vec<f64> = idx.iter().filter_map(|&k| lines[k].ts).collect();
    let obs: Vec<f64> = idx.iter().map(|&k| counted[k]).collect();
    let min_prompt = routed
        .iter()
        .map(|r| r.prompt)
        .fold(f64::INFINITY, f64::min);
    let (prompt, uncached) = routed.iter().fold((0.0, 0.0), |s, r| {
        (s.0 + r.prompt, s.1 + (r.prompt - r.matched).max(1.0))
    });
    let busiest = obs.iter().copied().fold(0.0, f64::max) / cadence;
    let r0 = busiest * uncached / prompt.max(1.0);
    if r0 <= 0.0 {
        return None;
    }
    // (mismatched lines, waited tokens, their seconds, waited requests), or
    // `None` once more than `limit` lines mismatch.
    let eval = |o: f64, r: f64, phi: f64, limit: usize| -> Option<(usize, f64, f64, usize)> {
        let base = times[0] + phi;
        let (mut f, mut k, mut acc, mut bad) = (f64::NEG_INFINITY, 0usize, 0.0, 0usize);
        let (mut wt, mut ws, mut wn) = (0.0, 0.0, 0usize);
        let close = |k: &mut usize, acc: &mut f64, bad: &mut usize| {
            if *k > 0 && (*acc - obs[*k]).abs() > 0.5 * min_prompt + 0.01 * obs[*k] {
                *bad += 1;
            }
            *acc = 0.0;
            *k += 1;
        };
        for q in routed {
            let u = (q.prompt - q.matched).max(1.0);
            let svc = o + u / r;
            let waited = q.ts < f;
            f = f.max(q.ts) + svc;
            if waited && q.ts > base {
                wt += u;
                ws += svc;
                wn += 1;
            }
            while k < times.len() && times[k] + phi < f {
                close(&mut k, &mut acc, &mut bad);
            }
            if bad > limit {
                return None;
            }
            if k < times.len() && f > base {
                acc += q.prompt;
            }
        }
        while k < times.len() {
            close(&mut k, &mut acc, &mut bad);
        }
        (bad <= limit).then_some((bad, wt, ws, wn))
    };
    // Coarse: per overhead, the rate at three phases; then every phase and
    // finer rates around it.
    let allowed = (idx.len() - 1) / 10;
    let mut fits = Vec::new();
    let mut best = usize::MAX - 1;
    for o in QUEUE_OVERHEADS_S {
        // The fewest mismatches and the lowest and highest rates with them.
        let mut coarse = (usize::MAX, r0, r0);
        let mut r = 0.2 * r0;
        while r < 3.0 * r0 {
            for phi in [0.15, 0.5, 0.85] {
                if let Some(e) = eval(o, r, phi, coarse.0) {
                    if e.0 < coarse.0 {
                        coarse = (e.0, r, r);
                    } else {
                        coarse.2 = r;
                    }
                }
            }
            r *= 1.04;
        }
        let mut r = coarse.1 / 1.12;
        while r < coarse.2 * 1.12 {
            for p in 0..QUEUE_PHASES {
                if let Some(e) = eval(o, r, p as f64 / QUEUE_PHASES as f64, best + 1)
                    && e.2 > 0.0
                {
                    best = best.min(e.0);
                    fits.push(e);
                }
            }
            r *= 1.01;
        }
    }
    let best = fits.iter().map(|e| e.0).min()?;
    if best > allowed {
        return None;
    }
    let mut ok: Vec<(f64, f64, f64, usize)> = fits
        .iter()
        .filter(|e| e.0 <= best + 1)
        .map(|e| (e.1 / e.2, e.1, e.2, e.3))
        .collect();
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    let lo = ok.first()?.0;
    let hi = ok.last()?.0;
    // The central fit: the median rate among the best fits.
    let mut central: Vec<&(f64, f64, f64, usize)> = ok.iter().collect();
    central.retain(|e| fits.iter().any(|f| f.0 == best && f.1 == e.1 && f.2 == e.2));
    let c = central
        .get(central.len() / 2)
        .copied()
        .or(ok.get(ok.len() / 2))?;
    Some(Queue {
        tokens: c.1,
        secs: c.2,
        lo,
        hi,
        waited: c.3,
    })
}
