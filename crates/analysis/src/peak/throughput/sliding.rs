//! The hit rates of one engine's scheduling intervals, solved from vLLM's
//! sliding window of the last 1000 requests with the EPP's routing.

use super::hit::Share;
use super::types::{HIT_RATE_WINDOW_REQUESTS, Line};

/// Smoothing of the sliding-window solve ([`Sliding`]): the weight of the
/// squared difference between neighbouring intervals' hit rates against
/// the lines' squared residuals (rate units).
const SLIDING_SMOOTH: f64 = 1e-2;
/// Standard deviations of the sliding-window solve's statistical error
/// added to each side of a span's rate (a 90 % two-sided normal bound).
const SLIDING_Z: f64 = 1.645;

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
pub(super) struct Sliding {
    /// Per shift of the prompt in progress (none, half, all of it): the
    /// cumulative queries at each line and each interval's hit rate.
    solved: Vec<(Vec<f64>, Vec<f64>)>,
    /// The central solve's rows (`(first column, coefficients)`), band
    /// Cholesky factor, bandwidth and residual variance, for the
    /// statistical error of a span's rate.
    rows: Vec<(usize, Vec<f64>)>,
    chol: Vec<f64>,
    band: usize,
    sigma2: f64,
}

/// Band Cholesky in place (`m` row-major `n × n`, nonzero within `b` of
/// the diagonal): `false` when not positive definite.
fn band_cholesky(m: &mut [f64], n: usize, b: usize) -> bool {
    for j in 0..n {
        let k0 = j.saturating_sub(b);
        let mut d = m[j * n + j];
        for k in k0..j {
            d -= m[j * n + k] * m[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return false;
        }
        let d = d.sqrt();
        m[j * n + j] = d;
        for i in j + 1..n.min(j + b + 1) {
            let mut s = m[i * n + j];
            for k in i.saturating_sub(b).max(k0)..j {
                s -= m[i * n + k] * m[j * n + k];
            }
            m[i * n + j] = s / d;
        }
    }
    true
}

/// Solves `L Lᵀ x = y` with a band Cholesky factor.
fn band_solve(l: &[f64], n: usize, b: usize, y: &[f64]) -> Vec<f64> {
    let mut x = y.to_vec();
    for i in 0..n {
        let mut s = x[i];
        for k in i.saturating_sub(b)..i {
            s -= l[i * n + k] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = x[i];
        for k in i + 1..n.min(i + b + 1) {
            s -= l[k * n + i] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
    x
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
        let window = HIT_RATE_WINDOW_REQUESTS as f64;
        if top <= window {
            return None;
        }
        let ahead: Vec<f64> = (0..n)
            .map(|k| {
                counted[k + 1..]
                    .iter()
                    .find(|c| **c > 0.0)
                    .copied()
                    .unwrap_or(0.0)
            })
            .collect();
        // The window's intervals and fractions per line (by request count).
        let weights: Vec<(usize, Vec<f64>)> = (0..n)
            .map(|k| {
                let lo = sched[k] - window;
                let mut m0 = k;
                while m0 > 0 && sched[m0 - 1] > lo {
                    m0 -= 1;
                }
                let w = (m0..=k)
                    .map(|m| {
                        let prev = if m == 0 { 0.0 } else { sched[m - 1] };
                        let span = sched[m] - prev;
                        if span > 0.0 {
                            ((sched[m] - prev.max(lo)) / span).clamp(0.0, 1.0)
                        } else {
                            1.0
                        }
                    })
                    .collect();
                (m0, w)
            })
            .collect();
        let band = weights
            .iter()
            .enumerate()
            .map(|(k, (m0, _))| k - m0)
            .max()?
            .max(1);
        let mut solved = Vec::new();
        let mut central = None;
        for (shift, smooth) in [(0.5, 1.0), (0.0, 1.0), (1.0, 1.0), (0.5, 0.1), (0.5, 10.0)] {
            let smooth = smooth * SLIDING_SMOOTH;
            let mut qc = Vec::with_capacity(n);
            let mut top = 0.0f64;
            for k in 0..n {
                top = top.max(history[k] + shift * ahead[k]);
                qc.push(top);
            }
            let q: Vec<f64> = (0..n)
                .map(|m| qc[m] - if m == 0 { 0.0 } else { qc[m - 1] })
                .collect();
            let mut rows = Vec::new();
            let mut target = Vec::new();
            for (k, (m0, w)) in weights.iter().enumerate() {
                let a: Vec<f64> = w.iter().enumerate().map(|(x, w)| w * q[m0 + x]).collect();
                let d: f64 = a.iter().sum();
                if d > 0.0 {
                    rows.push((*m0, a.iter().map(|x| x / d).collect::<Vec<f64>>()));
                    target.push(lines[k].hit.unwrap_or(0.0));
                }
            }
            let mut m = vec![0.0; n * n];
            let mut rhs = vec![0.0; n];
            for ((m0, a), y) in rows.iter().zip(&target) {
                for (x, ax) in a.iter().enumerate() {
                    rhs[m0 + x] += ax * y;
                    for (z, az) in a.iter().enumerate() {
                        m[(m0 + x) * n + m0 + z] += ax * az;
                    }
                }
            }
            for k in 0..n {
                m[k * n + k] += 1e-9;
                if k > 0 {
                    m[k * n + k] += smooth;
                    m[(k - 1) * n + k - 1] += smooth;
                    m[k * n + k - 1] -= smooth;
                    m[(k - 1) * n + k] -= smooth;
                }
            }
            if !band_cholesky(&mut m, n, band) {
                return None;
            }
            let h: Vec<f64> = band_solve(&m, n, band, &rhs)
                .into_iter()
                .map(|x| x.clamp(0.0, 1.0))
                .collect();
            if central.is_none() {
                let rss: f64 = rows
                    .iter()
                    .zip(&target)
                    .map(|((m0, a), y)| {
                        let f: f64 = a.iter().enumerate().map(|(x, ax)| ax * h[m0 + x]).sum();
                        (f - y).powi(2)
                    })
                    .sum();
                let sigma2 = rss / (rows.len() as f64 / 2.0).max(1.0);
                central = Some((rows, m, sigma2));
            }
            solved.push((qc, h));
        }
        let (rows, chol, sigma2) = central?;
        Some(Sliding {
            solved,
            rows,
            chol,
            band,
            sigma2,
        })
    }

    /// The hit rate of the queries scheduled between lines `i` and `j`:
    /// `(estimate, low, high)`, the bounds taking the prompt in progress
    /// at each line (none or all of it counted) and [`SLIDING_Z`] standard
    /// deviations of the solve (from its residuals).
    pub(super) fn share(&self, i: usize, j: usize) -> Option<Share> {
        let rate = |qc: &[f64], h: &[f64]| -> Option<(f64, Vec<f64>)> {
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
        };
        let (qc, h) = self.solved.first()?;
        let (est, c) = rate(qc, h)?;
        let n = qc.len();
        let x = band_solve(&self.chol, n, self.band, &c);
        let var: f64 = self
            .rows
            .iter()
            .map(|(m0, a)| {
                a.iter()
                    .enumerate()
                    .map(|(z, az)| az * x[m0 + z])
                    .sum::<f64>()
                    .powi(2)
            })
            .sum::<f64>()
            * self.sigma2;
        let sd = SLIDING_Z * var.sqrt();
        let (mut lo, mut hi) = (est - sd, est + sd);
        for (qc, h) in &self.solved[1..] {
            if let Some((r, _)) = rate(qc, h) {
                lo = lo.min(r - sd);
                hi = hi.max(r + sd);
            }
        }
        Some((est, lo.clamp(0.0, 1.0), hi.clamp(0.0, 1.0)))
    }
}
