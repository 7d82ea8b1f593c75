//! The hit rates of one engine's scheduling intervals, solved from vLLM's
//! sliding window of the last 1000 requests with the EPP's routing.
//!
//! # The solve
//!
//! The rates minimise `|A h − y|² + s·|D h|² + ε|h|²` (`A` the lines'
//! windows, below; `y` the printed rates; `D` the neighbouring
//! differences, `s` the smoothing, `ε` = 10⁻⁹): the normal equations
//! `H h = Aᵀy` with `H = AᵀA + s·DᵀD + ε·I`, symmetric positive
//! definite. A window holds up to `b` intervals (the intervals in 1000
//! requests, most of an engine's lines when it logs an hour or so), so
//! `H` is a band matrix of width `b`: building it costs `n·b²/2`
//! multiplications and its Cholesky factor as many again, for each of
//! the five solves. But a row of `A` is a window's mean, so `A x` and
//! `Aᵀz` cost `O(n)` from a running sum ([`system`]), and the solve is by
//! conjugate gradients on `H`, preconditioned by `H`'s tridiagonal part
//! that is known in `O(n)` (`AᵀA`'s diagonal and the penalty's three
//! diagonals): each iteration `O(n)`, about a hundred iterations on the
//! log set's engines (1 100–1 200 lines, windows of up to 1 000 of
//! them), against `n·b²` for the factor.
//!
//! **Tolerance.** The rates' iterations stop when
//! `|Aᵀy − H h| ≤ 10⁻¹² |Aᵀy|` ([`TOLERANCE`]). A span's rate `cᵀh` is
//! then off the exact solution's by `|xᵀr|`, with `r` the residual and
//! `x = H⁻¹c` (the span's own solve, below). Measured against the band
//! Cholesky factor (kept in [`banded`]: it solves windows of fewer than
//! [`DIRECT_BAND`] intervals, where it costs less, and any system whose
//! iterations do not converge), the module's test holds every
//! interval's rate and every span's rate and bounds within 10⁻⁸ on
//! generated engines (within 4·10⁻⁹ measured), far below the printed
//! rates' rounding (5·10⁻⁴); on the log set of docs/performance.md the
//! peak estimates are the factor's within 4·10⁻¹⁰ of themselves. The
//! 90 % interval's bootstrap is seeded by the blocks' tokens as the lines
//! count them, not by the computed tokens (see `bootstrap.rs`), so a rate
//! that moves within the tolerance moves the interval by as little.
//!
//! **A span's statistical error.** `var(cᵀh) = σ²·|A H⁻¹c|²` (the
//! rates' covariance `σ² H⁻¹AᵀA H⁻¹`, `σ²` the residual variance): one
//! more solve, of `H x = c`, to `|c − H x| ≤ 10⁻⁸ |c|`
//! ([`ERROR_TOLERANCE`]), then `|A x|²` in `O(n)`. Since `AᵀA ≤ H` and
//! `H ≥ ε·I`, the computed `|A x|` is off by at most
//! `|H⁻¹(c − H x)|_H ≤ |c − H x| / √ε ≤ 3.2·10⁻⁴ |c|`, and `|c| ≤ 1` (a
//! span's weights sum to 1): the bound added each side
//! ([`SLIDING_Z`]`·σ·|A x|`) is off by at most `5.3·10⁻⁴ σ`, `σ` the
//! residuals' standard deviation in rate units. Should the solve not
//! converge, the span takes the rolling fit instead.
//!
//! **Deflation.** An engine has one such solve per saturated span that
//! takes its rate from here (about 30 on the log set's engines), each
//! for a right-hand side that is one span's weights. The preconditioned
//! matrix's largest eigenvalues (up to a few hundred, against a bulk
//! between 0.07 and 2 on the log set) are `AᵀA`'s smooth directions, which
//! the tridiagonal preconditioner does not see; plain iterations keep
//! finding them again and took about 86 iterations a span. The span's
//! solve is deflated instead ([`Coarse`], `Normal::solve_deflated`):
//! with `Z` the indicators of blocks of [`COARSE_BLOCK`] consecutive
//! intervals and `E = Zᵀ H Z` (made and inverted once per engine, `k`
//! columns of `O(n)` each for `k = n / 16` blocks), the iterations start
//! from the coarse solution `Z E⁻¹ Zᵀ c` and keep every search direction
//! `H`-orthogonal to `Z`, so they work on the rest of the spectrum only:
//! about 27 iterations a span on the log set. `Zᵀ H w` costs `O(n)`
//! without `H w` (a row of `A Z` is its window over the blocks, whole
//! ones between its two ends), and `A p` follows the directions'
//! recurrence (`A p = A w + β A p − A Z μ`), so an iteration costs about
//! 1.4 plain ones. The stopping rule is the residual's
//! as before, so the bound above holds unchanged; the module's test
//! holds the deflated and the plain errors within 10⁻⁸ of the factor's
//! (within 1.4·10⁻¹¹ measured) and the deflated iterations below half
//! of the plain ones.

mod banded;
mod system;

use super::hit::Share;
use super::types::{HIT_RATE_WINDOW_REQUESTS, Line};
use system::{Coarse, Normal, Row, System};

/// Smoothing of the sliding-window solve ([`Sliding`]): the weight of the
/// squared difference between neighbouring intervals' hit rates against
/// the lines' squared residuals (rate units).
const SLIDING_SMOOTH: f64 = 1e-2;
/// Standard deviations of the sliding-window solve's statistical error
/// added to each side of a span's rate (a 90 % two-sided normal bound).
const SLIDING_Z: f64 = 1.645;
/// The conjugate gradients stop when the normal equations' residual is
/// at most this share of their right-hand side: for the rates.
const TOLERANCE: f64 = 1e-12;
/// The same for a span's statistical error (`H x = c`), which only
/// widens its bounds.
const ERROR_TOLERANCE: f64 = 1e-8;
/// Intervals per block of the coarse space that deflates a span's error
/// solve ([`Coarse`]): smaller blocks take fewer iterations, each with a
/// larger `E⁻¹` product (blocks of 12, 16 and 24 ran within 1 % of one
/// another's instructions on the log set's `glm-like.log`).
const COARSE_BLOCK: usize = 16;
/// Windows of fewer intervals than this are solved by the band Cholesky
/// factor: at `n·b²` it costs less than the hundred-odd iterations of
/// about `40·n` operations each.
const DIRECT_BAND: usize = 64;

/// The hit rates of one engine's scheduling intervals, solved from vLLM's
/// rolling rate once its window slides (more than
/// [`HIT_RATE_WINDOW_REQUESTS`] requests scheduled), with the EPP's
/// routing (which requests each line's window holds).
///
/// The requests scheduled by line `k` number `N_k` (routed before it, less
/// its `Waiting`), and its window holds the requests `N_k − 1000 < n ≤
/// N_k`: all of the scheduling intervals after the one holding request
/// `N_k − 1000`, a known fraction `w_km` (by request count) of that one.
/// With `q_m` the queries of interval `m` (the lines' counted prompts,
/// shifted by the prompt in progress since vLLM counts a query at
/// scheduling) and `h_m` its unknown hit rate, line `k` reads
/// `H_k = Σ w_km q_m h_m / Σ w_km q_m`: linear in `h`. The rates are its
/// least-squares solution with a light penalty on neighbouring
/// differences (the system is square and ill-posed: a line adds one
/// interval and one equation), clamped to `[0, 1]`.
pub(super) struct Sliding(Solve);

/// How [`Sliding`] was solved.
enum Solve {
    /// By conjugate gradients (see the module's documentation).
    Iterative(Iterative),
    /// By the band Cholesky factor: a narrow band, or iterations that do
    /// not converge.
    Direct(banded::Banded),
}

/// [`Sliding`] solved by conjugate gradients.
struct Iterative {
    /// Per shift of the prompt in progress (none, half, all of it): the
    /// cumulative queries at each line and each interval's hit rate.
    solved: Vec<(Vec<f64>, Vec<f64>)>,
    /// The central solve's system and residual variance, for the
    /// statistical error of a span's rate.
    central: System,
    sigma2: f64,
    /// The coarse space deflating the error solves on the central
    /// system (`None` if its Galerkin matrix had no factor: plain
    /// iterations then).
    coarse: Option<Coarse>,
    /// The iterations allowed a solve.
    max_iter: usize,
}

/// The prompt in progress shifted by half, none and all of it, and the
/// smoothing a tenth and ten times as strong at half: the five solves of
/// an engine's hit rates, `(shift, smoothing factor)`, in the order of
/// their results.
const SOLVES: [(f64, f64); 5] = [(0.5, 1.0), (0.0, 1.0), (1.0, 1.0), (0.5, 0.1), (0.5, 10.0)];

/// An engine's lines on the scale of its requests.
struct Schedule {
    /// The requests scheduled by each line (routed before it, less its
    /// `Waiting`), never decreasing.
    sched: Vec<f64>,
    /// The first positive prompt count after each line.
    ahead: Vec<f64>,
}

/// The [`Schedule`] of an engine's lines, or `None` when its window never
/// slides, the lines are not v1 with epoch times, or the decisions start
/// after the engine's first logged completion.
fn schedule(lines: &[Line], counted: &[f64], arrivals: &[f64]) -> Option<Schedule> {
    if arrivals.is_empty()
        || lines
            .iter()
            .any(|l| !l.v1 || !l.absolute || l.hit.is_none())
    {
        return None;
    }
    let first_count = lines.iter().position(|l| l.rate > 0.0)?;
    if arrivals[0] >= lines[first_count].ts? {
        return None;
    }
    let n = lines.len();
    let mut sched = Vec::with_capacity(n);
    let mut top = 0.0f64;
    for l in lines {
        let s = arrivals
            .partition_point(|a| *a <= l.ts.unwrap_or(f64::NEG_INFINITY))
            .saturating_sub(l.queued as usize) as f64;
        top = top.max(s);
        sched.push(top);
    }
    if top <= HIT_RATE_WINDOW_REQUESTS as f64 {
        return None;
    }
    // The first positive count after each line (from the end: one pass).
    let mut ahead = vec![0.0; n];
    let mut next = 0.0;
    for k in (0..n).rev() {
        ahead[k] = next;
        if counted[k] > 0.0 {
            next = counted[k];
        }
    }
    Some(Schedule { sched, ahead })
}

/// The cumulative queries at each line with the prompt in progress
/// shifted by `shift` of the next count (`ahead`), and each interval's.
fn queries(history: &[f64], ahead: &[f64], shift: f64) -> (Vec<f64>, Vec<f64>) {
    let n = history.len().min(ahead.len());
    let mut qc = Vec::with_capacity(n);
    let mut top = 0.0f64;
    for k in 0..n {
        top = top.max(history[k] + shift * ahead[k]);
        qc.push(top);
    }
    let q: Vec<f64> = (0..n)
        .map(|m| qc[m] - if m == 0 { 0.0 } else { qc[m - 1] })
        .collect();
    (qc, q)
}

/// The hit rate of the queries scheduled between lines `i` and `j` under
/// one solve (the cumulative queries `qc`, the rates `h`), and each
/// interval's weight in it; `None` when no query was scheduled there.
fn span_rate(qc: &[f64], h: &[f64], i: usize, j: usize) -> Option<(f64, Vec<f64>)> {
    let total = qc[j] - qc[i];
    if total <= 0.0 {
        return None;
    }
    let mut c = vec![0.0; qc.len()];
    let mut hits = 0.0;
    for m in i + 1..=j {
        let q = qc[m] - qc[m - 1];
        c[m] = q / total;
        hits += q * h[m];
    }
    Some((hits / total, c))
}

/// A span's `(estimate, low, high)`: `est` (the first solve's) `sd` each
/// side, widened to every other solve's rate of the span `sd` each side,
/// clamped to `[0, 1]`.
fn bounds(est: f64, sd: f64, solved: &[(Vec<f64>, Vec<f64>)], i: usize, j: usize) -> Share {
    let (mut lo, mut hi) = (est - sd, est + sd);
    for (qc, h) in &solved[1..] {
        if let Some((r, _)) = span_rate(qc, h, i, j) {
            lo = lo.min(r - sd);
            hi = hi.max(r + sd);
        }
    }
    (est, lo.clamp(0.0, 1.0), hi.clamp(0.0, 1.0))
}

impl Sliding {
    /// The solve for one engine's lines, or `None` when its window never
    /// slides, the lines are not v1 with epoch times, or the decisions
    /// start after the engine's first logged completion.
    pub(super) fn new(
        lines: &[Line],
        counted: &[f64],
        history: &[f64],
        arrivals: &[f64],
    ) -> Option<Sliding> {
        // The factor when the band is narrow, or when the iterations do
        // not converge (every other `None` is the factor's too).
        Iterative::new(lines, counted, history, arrivals, DIRECT_BAND)
            .map(Solve::Iterative)
            .or_else(|| banded::Banded::new(lines, counted, history, arrivals).map(Solve::Direct))
            .map(Sliding)
    }

    /// The hit rate of the queries scheduled between lines `i` and `j`:
    /// `(estimate, low, high)`, the bounds taking the prompt in progress
    /// at each line (none or all of it counted) and [`SLIDING_Z`] standard
    /// deviations of the solve (from its residuals).
    pub(super) fn share(&self, i: usize, j: usize) -> Option<Share> {
        match &self.0 {
            Solve::Iterative(s) => s.share(i, j),
            Solve::Direct(s) => s.share(i, j),
        }
    }
}

impl Iterative {
    /// [`Sliding::new`] by conjugate gradients, or `None` also when the
    /// windows hold fewer than `min_band` intervals or the iterations do
    /// not converge in `min(4n, b²/16)` iterations, at least 256 (at
    /// most about twice the factor's cost).
    fn new(
        lines: &[Line],
        counted: &[f64],
        history: &[f64],
        arrivals: &[f64],
        min_band: usize,
    ) -> Option<Iterative> {
        let Schedule { sched, ahead } = schedule(lines, counted, arrivals)?;
        let n = lines.len();
        let window = HIT_RATE_WINDOW_REQUESTS as f64;
        // Each line's window (by request count): its first interval and
        // the fraction of that interval's requests inside; every later
        // interval up to the line's own is inside whole. `sched` never
        // decreases, nor does a window's start.
        let mut first = 0;
        let windows: Vec<(usize, f64)> = (0..n)
            .map(|k| {
                let lo = sched[k] - window;
                while first < k && sched[first] <= lo {
                    first += 1;
                }
                let prev = if first == 0 { 0.0 } else { sched[first - 1] };
                let span = sched[first] - prev;
                let frac = if span > 0.0 {
                    ((sched[first] - prev.max(lo)) / span).clamp(0.0, 1.0)
                } else {
                    1.0
                };
                (first, frac)
            })
            .collect();
        let band = windows
            .iter()
            .enumerate()
            .map(|(k, (first, _))| k - first)
            .max()?
            .max(1);
        if band < min_band {
            return None;
        }
        let max_iter = (4 * n).min(band * band / 16).max(256);
        // The five [`SOLVES`], in their order in `solved`. The three at
        // half share their system, and start from the first one's solution.
        let mut solved: Vec<Option<(Vec<f64>, Vec<f64>)>> = vec![None; SOLVES.len()];
        let mut central = None;
        let mut start = vec![0.0; n];
        for shift in [0.5, 0.0, 1.0] {
            let (qc, q) = queries(history, &ahead, shift);
            let mut rows = Vec::new();
            let mut target = Vec::new();
            for (k, (first, frac)) in windows.iter().enumerate() {
                let d = frac * q[*first] + (qc[k] - qc[*first]);
                if d > 0.0 {
                    rows.push(Row {
                        first: *first,
                        last: k,
                        frac: *frac,
                        inv: 1.0 / d,
                    });
                    target.push(lines[k].hit.unwrap_or(0.0));
                }
            }
            let sys = System { q, rows, target };
            let rhs = sys.rhs();
            for (i, (_, strength)) in SOLVES.iter().enumerate().filter(|(_, s)| s.0 == shift) {
                let mut x = start.clone();
                Normal::new(&sys, strength * SLIDING_SMOOTH)
                    .solve(&rhs, &mut x, TOLERANCE, max_iter)?;
                if i == 0 {
                    start.clone_from(&x);
                }
                let h: Vec<f64> = x.into_iter().map(|x| x.clamp(0.0, 1.0)).collect();
                solved[i] = Some((qc.clone(), h));
            }
            if shift == 0.5 {
                central = Some(sys);
            }
        }
        let solved = solved.into_iter().collect::<Option<Vec<_>>>()?;
        let central = central?;
        let mut fit = Vec::new();
        central.apply(&solved[0].1, &mut Vec::new(), &mut fit);
        let rss: f64 = fit
            .iter()
            .zip(&central.target)
            .map(|(f, y)| (f - y).powi(2))
            .sum();
        let sigma2 = rss / (central.rows.len() as f64 / 2.0).max(1.0);
        let coarse = Normal::new(&central, SLIDING_SMOOTH).coarse(COARSE_BLOCK);
        Some(Iterative {
            solved,
            central,
            sigma2,
            coarse,
            max_iter,
        })
    }

    /// [`Sliding::share`].
    fn share(&self, i: usize, j: usize) -> Option<Share> {
        let (qc, h) = self.solved.first()?;
        let (est, c) = span_rate(qc, h, i, j)?;
        let sd = self.error(&c, self.coarse.as_ref())?;
        Some(bounds(est, sd, &self.solved, i, j))
    }

    /// The statistical error added each side of the span's rate whose
    /// weights are `c`: [`SLIDING_Z`]`·σ·|A x|` with `H x = c` solved by
    /// the iterations, deflated by `coarse` when there is one; `None`
    /// when they do not converge.
    fn error(&self, c: &[f64], coarse: Option<&Coarse>) -> Option<f64> {
        let mut x = vec![0.0; c.len()];
        let mut normal = Normal::new(&self.central, SLIDING_SMOOTH);
        match coarse {
            Some(z) => normal.solve_deflated(z, c, &mut x, ERROR_TOLERANCE, self.max_iter),
            None => normal.solve(c, &mut x, ERROR_TOLERANCE, self.max_iter),
        }?;
        let mut ax = Vec::new();
        self.central.apply(&x, &mut Vec::new(), &mut ax);
        let var = ax.iter().map(|v| v * v).sum::<f64>() * self.sigma2;
        Some(SLIDING_Z * var.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::banded::Banded;
    use super::*;

    /// A deterministic stream of numbers in `[0, 1)`.
    pub(super) fn numbers(seed: u64) -> impl FnMut() -> f64 {
        let mut x = seed;
        move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// One engine's v1 lines every 10 s as vLLM prints them: `per` requests
    /// (on average) scheduled a line, prompts of 500 to 8,500 tokens, hit
    /// rates drifting with a step, the rolling rate over the last 1000
    /// requests scheduled (printed to a tenth of a percent), a few
    /// waiting; with the arrivals the EPP routed.
    fn engine(lines: usize, per: f64, seed: u64) -> (Vec<Line>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut r = numbers(seed);
        let t0 = 1_787_320_800.0;
        let (mut arrivals, mut requests) = (Vec::new(), Vec::<(f64, f64)>::new());
        let mut out = Vec::new();
        let mut counted = Vec::new();
        for k in 0..lines {
            let t = t0 + 10.0 * k as f64;
            let own = if k < lines / 2 { 0.8 } else { 0.4 } + 0.1 * (k as f64 / 37.0).sin();
            let count = (per * (0.5 + r())).round() as usize;
            let mut tokens = 0.0;
            for c in 0..count {
                let prompt = (500.0 + 8000.0 * r()).round();
                let hit = (own + 0.2 * (r() - 0.5)).clamp(0.0, 1.0);
                arrivals.push(t - 10.0 + 10.0 * (c as f64 + 0.5) / count as f64);
                requests.push((prompt, prompt * hit));
                tokens += prompt;
            }
            let queued = if r() < 0.6 { (3.0 * r()) as u32 } else { 0 };
            let scheduled = requests.len().saturating_sub(queued as usize);
            let from = scheduled.saturating_sub(HIT_RATE_WINDOW_REQUESTS);
            let (q, h) = requests[from..scheduled]
                .iter()
                .fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1));
            let rate = if q > 0.0 { h / q } else { 0.0 };
            out.push(Line {
                ts: Some(t),
                rate: tokens / 10.0,
                hit: Some((1000.0 * rate).round() / 1000.0),
                waiting: queued > 0,
                queued,
                v1: true,
                absolute: true,
            });
            counted.push(tokens);
        }
        let mut history = Vec::with_capacity(lines);
        let mut sum = 0.0;
        for c in &counted {
            sum += c;
            history.push(sum);
        }
        (out, counted, history, arrivals)
    }

    /// The conjugate gradients against the band Cholesky factor (the
    /// direct solve) on engines of 60 to 1,500 lines whose windows hold 1
    /// to 200 lines: each interval's hit rate, and each span's rate and
    /// bounds, within `1e-8` (measured: within 4e-9); each span's
    /// statistical error, deflated or not, within `1e-8` of the factor's
    /// too, and the deflated iterations fewer than the plain ones where
    /// the iterations are used (windows of at least [`DIRECT_BAND`]
    /// intervals), less than half of them in all.
    #[test]
    fn the_iterative_solve_matches_the_direct_one() {
        let mut total = (0, 0);
        for (lines, per, seed) in [
            (60, 40.0, 1),
            (150, 12.0, 2),
            (400, 5.0, 3),
            (700, 14.0, 4),
            (1500, 5.0, 5),
            (300, 1500.0, 6),
        ] {
            let (l, counted, history, arrivals) = engine(lines, per, seed);
            let direct = Banded::new(&l, &counted, &history, &arrivals).expect("direct");
            let iterative =
                Iterative::new(&l, &counted, &history, &arrivals, 1).expect("iterative");
            for (d, i) in direct.solved().iter().zip(&iterative.solved) {
                assert_eq!(d.0, i.0);
                for (m, (a, b)) in d.1.iter().zip(&i.1).enumerate() {
                    assert!((a - b).abs() < 1e-8, "{lines} lines: h[{m}] {a} {b}");
                }
            }
            let mut spans = 0;
            // The error solves' iterations: (plain, deflated).
            let mut its = (0, 0);
            for i in (0..lines - 3).step_by(lines / 20 + 1) {
                for len in [3, 10, 40] {
                    let j = (i + len).min(lines - 1);
                    let (Some(d), Some(s)) = (direct.share(i, j), iterative.share(i, j)) else {
                        assert_eq!(direct.share(i, j), None);
                        assert_eq!(iterative.share(i, j), None);
                        continue;
                    };
                    spans += 1;
                    for (a, b) in [(d.0, s.0), (d.1, s.1), (d.2, s.2)] {
                        assert!((a - b).abs() < 1e-8, "{lines} lines, {i}..{j}: {d:?} {s:?}");
                    }
                    let (qc, h) = &iterative.solved[0];
                    let (_, c) = span_rate(qc, h, i, j).expect("a span");
                    let exact = direct.error(&c);
                    let plain = iterative.error(&c, None).expect("plain");
                    let z = iterative.coarse.as_ref().expect("a coarse space");
                    let deflated = iterative.error(&c, Some(z)).expect("deflated");
                    for e in [plain, deflated] {
                        assert!(
                            (e - exact).abs() < 1e-8,
                            "{lines} lines, {i}..{j}: {exact} {e}"
                        );
                    }
                    let mut normal = Normal::new(&iterative.central, SLIDING_SMOOTH);
                    let mut x = vec![0.0; c.len()];
                    let max = iterative.max_iter;
                    its.0 += normal
                        .solve(&c, &mut x, ERROR_TOLERANCE, max)
                        .expect("plain");
                    its.1 += normal
                        .solve_deflated(z, &c, &mut x, ERROR_TOLERANCE, max)
                        .expect("deflated");
                }
            }
            assert!(spans > 20, "{spans}");
            // As solved in use: windows of at least [`DIRECT_BAND`].
            if direct.band() >= DIRECT_BAND {
                assert!(its.1 < its.0, "{lines} lines: {its:?} iterations");
                total.0 += its.0;
                total.1 += its.1;
            }
        }
        // Measured: 7 047 deflated against 26 566 plain; the errors all
        // within 1.4e-11 of the factor's.
        assert!(2 * total.1 < total.0, "{total:?} iterations");
    }
}
