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
/// Matrix rows of the sliding-window solve's normal equations summed
/// together (see [`Sliding::new`]): 32 rows of a window of about a
/// thousand intervals stay within a core's second-level cache.
const TILE: usize = 32;

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
/// the diagonal; only the lower triangle is read and written): `false`
/// when not positive definite.
///
/// The entries of a column are independent sums: they are computed four
/// rows at a time (each sum still in the order of `k`, so the factor is
/// the same to the bit as one row at a time), which keeps the processor's
/// floating-point units busy instead of waiting on one sum's latency.
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
        let end = n.min(j + b + 1);
        let mut i = j + 1;
        while i + 4 <= end {
            // Where each row's sum starts (later for later rows: never
            // after `j`, since `i + 3 <= j + b`).
            let st = [0, 1, 2, 3].map(|l| (i + l).saturating_sub(b).max(k0));
            let mut s = [0, 1, 2, 3].map(|l| m[(i + l) * n + j]);
            {
                let rj = &m[j * n..j * n + j];
                let row = |l: usize| &m[(i + l) * n..(i + l) * n + j];
                let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
                for (l, r) in [r0, r1, r2].into_iter().enumerate() {
                    for k in st[l]..st[3] {
                        s[l] -= r[k] * rj[k];
                    }
                }
                for k in st[3]..j {
                    let x = rj[k];
                    s[0] -= r0[k] * x;
                    s[1] -= r1[k] * x;
                    s[2] -= r2[k] * x;
                    s[3] -= r3[k] * x;
                }
            }
            for (l, s) in s.into_iter().enumerate() {
                m[(i + l) * n + j] = s / d;
            }
            i += 4;
        }
        for i in i..end {
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

/// The normal equations of the weighted rows (`(first column,
/// coefficients)`) against `target`: the lower triangle of `AᵀA`
/// (row-major `n × n`; the factor and the solves read no other entry: the
/// matrix is symmetric) and `Aᵀy`. Summed [`TILE`] matrix rows at a time,
/// so that the rows' sums stay in the cache; each entry still adds the
/// rows in their order.
fn normal_equations(rows: &[(usize, Vec<f64>)], target: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut m = vec![0.0; n * n];
    let mut rhs = vec![0.0; n];
    for ((m0, a), y) in rows.iter().zip(target) {
        for (x, ax) in a.iter().enumerate() {
            rhs[m0 + x] += ax * y;
        }
    }
    for p in (0..n).step_by(TILE) {
        let hi = (p + TILE).min(n);
        for (m0, a) in rows {
            let (x0, x1) = (p.saturating_sub(*m0), hi.saturating_sub(*m0).min(a.len()));
            for x in x0..x1 {
                let (ax, at) = (a[x], (m0 + x) * n + m0);
                for (mz, az) in m[at..=at + x].iter_mut().zip(&a[..=x]) {
                    *mz += ax * az;
                }
            }
        }
    }
    (m, rhs)
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
        // The first positive count after each line (from the end: one pass).
        let mut ahead = vec![0.0; n];
        let mut next = 0.0;
        for k in (0..n).rev() {
            ahead[k] = next;
            if counted[k] > 0.0 {
                next = counted[k];
            }
        }
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
            let (mut m, rhs) = normal_equations(&rows, &target, n);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream of numbers in `[0, 1)`.
    fn numbers(seed: u64) -> impl FnMut() -> f64 {
        let mut x = seed;
        move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Rows as [`Sliding::new`] makes them: each starting at or after the
    /// previous one's start and ending one column later.
    fn rows(n: usize, b: usize, seed: u64) -> (Vec<(usize, Vec<f64>)>, Vec<f64>) {
        let mut r = numbers(seed);
        let mut m0 = 0;
        let rows: Vec<_> = (0..n)
            .map(|k| {
                m0 = (m0 + usize::from(r() < 0.7))
                    .max(k.saturating_sub(b))
                    .min(k);
                (m0, (m0..=k).map(|_| r()).collect())
            })
            .collect();
        let target = (0..n).map(|_| r()).collect();
        (rows, target)
    }

    #[test]
    fn normal_equations_and_factor_match_the_plain_loops_bit_for_bit() {
        for (n, b, seed) in [
            (1, 1, 1),
            (7, 3, 2),
            (70, 9, 3),
            (150, 149, 4),
            (301, 40, 5),
        ] {
            let (rows, target) = rows(n, b, seed);
            let band = rows
                .iter()
                .enumerate()
                .map(|(k, (m0, _))| k - m0)
                .max()
                .unwrap()
                .max(1);
            // The plain loops: every entry, one row of the factor at a time.
            let mut plain = vec![0.0; n * n];
            let mut plain_rhs = vec![0.0; n];
            for ((m0, a), y) in rows.iter().zip(&target) {
                for (x, ax) in a.iter().enumerate() {
                    plain_rhs[m0 + x] += ax * y;
                    for (z, az) in a.iter().enumerate() {
                        plain[(m0 + x) * n + m0 + z] += ax * az;
                    }
                }
            }
            let (mut m, rhs) = normal_equations(&rows, &target, n);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&rhs), bits(&plain_rhs));
            for i in 0..n {
                assert_eq!(
                    bits(&m[i * n..=i * n + i]),
                    bits(&plain[i * n..=i * n + i]),
                    "row {i}"
                );
            }
            for k in 0..n {
                plain[k * n + k] += 0.1;
                m[k * n + k] += 0.1;
            }
            for j in 0..n {
                let k0 = j.saturating_sub(band);
                let mut d = plain[j * n + j];
                for k in k0..j {
                    d -= plain[j * n + k] * plain[j * n + k];
                }
                let d = d.sqrt();
                plain[j * n + j] = d;
                for i in j + 1..n.min(j + band + 1) {
                    let mut s = plain[i * n + j];
                    for k in i.saturating_sub(band).max(k0)..j {
                        s -= plain[i * n + k] * plain[j * n + k];
                    }
                    plain[i * n + j] = s / d;
                }
            }
            assert!(band_cholesky(&mut m, n, band));
            for i in 0..n {
                assert_eq!(
                    bits(&m[i * n..=i * n + i]),
                    bits(&plain[i * n..=i * n + i]),
                    "row {i}"
                );
            }
        }
    }
}
