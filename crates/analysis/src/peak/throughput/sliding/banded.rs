//! The sliding-window solve by the band Cholesky factor of the normal
//! equations (`n·b²` for a window of `b` intervals): windows of fewer than
//! [`super::DIRECT_BAND`] intervals, systems whose iterations do not
//! converge, and the reference the iterative solve is tested against.

use super::super::hit::Share;
use super::super::types::{HIT_RATE_WINDOW_REQUESTS, Line};
use super::{SLIDING_SMOOTH, SLIDING_Z, SOLVES, Schedule, bounds, queries, schedule, span_rate};

/// Matrix columns of the sliding-window solve's normal equations summed
/// together (see [`normal_equations`]): 32 columns of a window of about a
/// thousand intervals stay within a core's second-level cache.
const TILE: usize = 32;
/// Columns of the sliding-window solve's factor made together (see
/// `band_cholesky`).
const COLUMNS: usize = 4;

/// [`super::Sliding`] solved by the band Cholesky factor.
pub(super) struct Banded {
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

/// Band Cholesky in place: `m` holds the lower triangle of an `n × n`
/// symmetric matrix nonzero within `b` of the diagonal, by columns, in
/// band storage ([`band_at`]); on return it holds the factor `L` the same
/// way. `false` when not positive definite.
///
/// Column `j` is its matrix column less, for each earlier column `k` that
/// reaches it, `L[j,k]` times column `k` of the factor: each entry's sum
/// runs in the order of `k`, as in the textbook loops (the test holds the
/// two to the same bits), and each step is a whole stretch of a column,
/// which the processor's vector units do two entries at a time. The
/// columns are made [`COLUMNS`] at a time, so that each earlier column
/// is read from memory once for all of them.
fn band_cholesky(m: &mut [f64], n: usize, b: usize) -> bool {
    let w = b + 1;
    let mut j = 0;
    while j < n {
        let cols = COLUMNS.min(n - j);
        let (done, rest) = m.split_at_mut(j * w);
        let block = &mut rest[..cols * w];
        // The earlier columns, in order, on each column of the block.
        for k in j.saturating_sub(b)..j {
            let ck = &done[k * w..k * w + w];
            for c in 0..cols {
                let jc = j + c;
                // Column `k` reaches row `k + b` at most.
                if k + b < jc {
                    break;
                }
                let cnt = n.min(k + b + 1) - jc;
                let x = ck[jc - k];
                let col = &mut block[c * w..c * w + cnt];
                for (s, l) in col.iter_mut().zip(&ck[jc - k..jc - k + cnt]) {
                    *s -= l * x;
                }
            }
        }
        // Then the block's own columns, each finished before the next.
        for c in 0..cols {
            let jc = j + c;
            let (before, col) = block.split_at_mut(c * w);
            let len = n.min(jc + b + 1) - jc;
            for p in 0..c {
                let k = j + p;
                if k + b < jc {
                    continue;
                }
                let cp = &before[p * w..p * w + w];
                let cnt = n.min(k + b + 1) - jc;
                let x = cp[jc - k];
                for (s, l) in col[..cnt].iter_mut().zip(&cp[jc - k..jc - k + cnt]) {
                    *s -= l * x;
                }
            }
            let d = col[0];
            if d <= 0.0 || !d.is_finite() {
                return false;
            }
            let d = d.sqrt();
            col[0] = d;
            for s in &mut col[1..len] {
                *s /= d;
            }
        }
        j += cols;
    }
    true
}

/// Where entry `(i, j)`, `j <= i <= j + b`, of a band matrix (or its
/// factor) is kept: column by column, each `b + 1` entries from the
/// diagonal down (`n · (b + 1)` numbers in all, not `n²`).
fn band_at(i: usize, j: usize, b: usize) -> usize {
    j * (b + 1) + (i - j)
}

/// Solves `L Lᵀ x = y` with a band Cholesky factor ([`band_cholesky`]).
/// The forward pass subtracts each solved entry from the entries below
/// it, which adds up every entry's sum in the same order as the
/// textbook's row by row.
fn band_solve(l: &[f64], n: usize, b: usize, y: &[f64]) -> Vec<f64> {
    let w = b + 1;
    let mut x = y.to_vec();
    for i in 0..n {
        let col = &l[i * w..i * w + w];
        let xi = x[i] / col[0];
        x[i] = xi;
        let end = n.min(i + b + 1);
        for (s, lk) in x[i + 1..end].iter_mut().zip(&col[1..]) {
            *s -= lk * xi;
        }
    }
    for i in (0..n).rev() {
        let col = &l[i * w..i * w + w];
        let end = n.min(i + b + 1);
        let mut s = x[i];
        for (lk, xk) in col[1..].iter().zip(&x[i + 1..end]) {
            s -= lk * xk;
        }
        x[i] = s / col[0];
    }
    x
}

/// The normal equations of the weighted rows (`(first column,
/// coefficients)`, each at most `b + 1` long) against `target`: the lower
/// triangle of `AᵀA` in band storage ([`band_at`]; the factor and the
/// solves read no other entry: the matrix is symmetric) and `Aᵀy`.
/// Summed [`TILE`] matrix columns at a time, so that the columns' sums
/// stay in the cache; each entry still adds the rows in their order.
fn normal_equations(
    rows: &[(usize, Vec<f64>)],
    target: &[f64],
    n: usize,
    b: usize,
) -> (Vec<f64>, Vec<f64>) {
    let w = b + 1;
    let mut m = vec![0.0; n * w];
    let mut rhs = vec![0.0; n];
    for ((m0, a), y) in rows.iter().zip(target) {
        for (x, ax) in a.iter().enumerate() {
            rhs[m0 + x] += ax * y;
        }
    }
    for p in (0..n).step_by(TILE) {
        let hi = (p + TILE).min(n);
        for (m0, a) in rows {
            let (z0, z1) = (p.saturating_sub(*m0), hi.saturating_sub(*m0).min(a.len()));
            for z in z0..z1 {
                let (az, at) = (a[z], (m0 + z) * w);
                for (mx, ax) in m[at..at + a.len() - z].iter_mut().zip(&a[z..]) {
                    *mx += ax * az;
                }
            }
        }
    }
    (m, rhs)
}

impl Banded {
    /// Per shift of the prompt in progress, the cumulative queries and
    /// the intervals' rates (for the tests).
    #[cfg(test)]
    pub(super) fn solved(&self) -> &[(Vec<f64>, Vec<f64>)] {
        &self.solved
    }

    /// The widest window, in intervals (for the tests).
    #[cfg(test)]
    pub(super) fn band(&self) -> usize {
        self.band
    }

    /// The solve for one engine's lines, or `None` when its window never
    /// slides, the lines are not v1 with epoch times, or the decisions
    /// start after the engine's first logged completion.
    pub(super) fn new(
        lines: &[Line],
        counted: &[f64],
        history: &[f64],
        arrivals: &[f64],
    ) -> Option<Banded> {
        let Schedule { sched, ahead } = schedule(lines, counted, arrivals)?;
        let n = lines.len();
        let window = HIT_RATE_WINDOW_REQUESTS as f64;
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
        // The five [`SOLVES`], in their order in `solved`. The three at
        // half share their rows and normal equations.
        let mut solved: Vec<Option<(Vec<f64>, Vec<f64>)>> = vec![None; SOLVES.len()];
        let mut central = None;
        for shift in [0.5, 0.0, 1.0] {
            let (qc, q) = queries(history, &ahead, shift);
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
            let (mut normal, rhs) = normal_equations(&rows, &target, n, band);
            let mine: Vec<usize> = (0..SOLVES.len())
                .filter(|i| SOLVES[*i].0 == shift)
                .collect();
            for (at, i) in mine.iter().enumerate() {
                let smooth = SOLVES[*i].1 * SLIDING_SMOOTH;
                // The last solve of this shift takes the sums over.
                let mut m = if at + 1 == mine.len() {
                    std::mem::take(&mut normal)
                } else {
                    normal.clone()
                };
                for k in 0..n {
                    m[band_at(k, k, band)] += 1e-9;
                    if k > 0 {
                        m[band_at(k, k, band)] += smooth;
                        m[band_at(k - 1, k - 1, band)] += smooth;
                        m[band_at(k, k - 1, band)] -= smooth;
                    }
                }
                if !band_cholesky(&mut m, n, band) {
                    return None;
                }
                let h: Vec<f64> = band_solve(&m, n, band, &rhs)
                    .into_iter()
                    .map(|x| x.clamp(0.0, 1.0))
                    .collect();
                if *i == 0 {
                    let rss: f64 = rows
                        .iter()
                        .zip(&target)
                        .map(|((m0, a), y)| {
                            let f: f64 = a.iter().enumerate().map(|(x, ax)| ax * h[m0 + x]).sum();
                            (f - y).powi(2)
                        })
                        .sum();
                    let sigma2 = rss / (rows.len() as f64 / 2.0).max(1.0);
                    central = Some((std::mem::take(&mut rows), m, sigma2));
                }
                solved[*i] = Some((qc.clone(), h));
            }
        }
        let solved = solved.into_iter().collect::<Option<Vec<_>>>()?;
        let (rows, chol, sigma2) = central?;
        Some(Banded {
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
        let (qc, h) = self.solved.first()?;
        let (est, c) = span_rate(qc, h, i, j)?;
        Some(bounds(est, self.error(&c), &self.solved, i, j))
    }

    /// The statistical error added each side of the span's rate whose
    /// weights are `c` ([`SLIDING_Z`]`·σ·|A H⁻¹c|`), by the factor.
    pub(super) fn error(&self, c: &[f64]) -> f64 {
        let x = band_solve(&self.chol, c.len(), self.band, c);
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
        SLIDING_Z * var.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::numbers;
    use super::*;

    /// Rows as [`Banded::new`] makes them: each starting at or after the
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
    fn normal_equations_factor_and_solve_match_the_plain_loops_bit_for_bit() {
        for (n, b, seed) in [
            (1, 1, 1),
            (2, 1, 6),
            (3, 1, 7),
            (5, 2, 8),
            (7, 3, 2),
            (9, 8, 9),
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
            // The plain loops on the whole matrix: every entry, one row of
            // the factor at a time, one row of each solve at a time.
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
            let (mut m, rhs) = normal_equations(&rows, &target, n, band);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            // The band of the lower triangle, column by column.
            let lower = |full: &[f64]| {
                let mut v = Vec::new();
                for j in 0..n {
                    for i in j..n.min(j + band + 1) {
                        v.push(full[i * n + j]);
                    }
                }
                v
            };
            let stored = |m: &[f64]| {
                let mut v = Vec::new();
                for j in 0..n {
                    for i in j..n.min(j + band + 1) {
                        v.push(m[band_at(i, j, band)]);
                    }
                }
                v
            };
            assert_eq!(bits(&rhs), bits(&plain_rhs));
            assert_eq!(bits(&stored(&m)), bits(&lower(&plain)));
            // Nothing outside the band.
            for i in 0..n {
                for j in 0..i.saturating_sub(band) {
                    assert_eq!(plain[i * n + j], 0.0, "({i}, {j})");
                }
            }
            for k in 0..n {
                plain[k * n + k] += 0.1;
                m[band_at(k, k, band)] += 0.1;
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
            assert_eq!(bits(&stored(&m)), bits(&lower(&plain)));
            let mut x = plain_rhs.clone();
            for i in 0..n {
                let mut s = x[i];
                for k in i.saturating_sub(band)..i {
                    s -= plain[i * n + k] * x[k];
                }
                x[i] = s / plain[i * n + i];
            }
            for i in (0..n).rev() {
                let mut s = x[i];
                for k in i + 1..n.min(i + band + 1) {
                    s -= plain[k * n + i] * x[k];
                }
                x[i] = s / plain[i * n + i];
            }
            assert_eq!(bits(&band_solve(&m, n, band, &rhs)), bits(&x));
        }
    }

    #[test]
    fn a_matrix_not_positive_definite_has_no_factor() {
        // [[1, 2], [2, 1]]: eigenvalues 3 and -1.
        let mut m = vec![1.0, 2.0, 1.0, 0.0];
        assert!(!band_cholesky(&mut m, 2, 1));
        let mut m = vec![f64::NAN, 0.0];
        assert!(!band_cholesky(&mut m, 1, 1));
    }
}
