//! One shift's least-squares system of the sliding-window solve, applied
//! in O(n) from running sums, and its preconditioned conjugate gradients.
//!
//! Row `k` is its window's weighted mean of the intervals' hit rates: all
//! of the intervals `first < m ≤ last` whole and a fraction `frac` of
//! interval `first`, each by its queries `q_m`, over their sum `D_k`. So
//! `(A x)_k = (frac·q_first·x_first + P_last − P_first) / D_k` with `P`
//! the running sum of `q_m x_m`, and `(Aᵀz)_m` is `q_m` times the sum of
//! `z_k / D_k` over the rows that hold interval `m` (two running sums
//! over the rows, whose starts and ends both only grow): both O(n),
//! where the normal equations' matrix has `n·b` entries and its band
//! Cholesky factor costs `n·b²/2`.

/// One row of [`System`]: a line whose window holds queries.
#[derive(Clone, Copy, Debug)]
pub(super) struct Row {
    /// The window's first interval, counted by its fraction.
    pub(super) first: usize,
    /// Its last interval (the line's own).
    pub(super) last: usize,
    /// The fraction of the first interval's requests inside the window.
    pub(super) frac: f64,
    /// One over the window's queries (`1 / D_k`).
    pub(super) inv: f64,
}

/// The rows of one shift of the prompt in progress, their targets (the
/// printed rates) and the intervals' queries.
pub(super) struct System {
    pub(super) q: Vec<f64>,
    pub(super) rows: Vec<Row>,
    pub(super) target: Vec<f64>,
}

/// The regularised normal equations' matrix
/// `H = AᵀA + smooth·DᵀD + RIDGE·I`, `D` the neighbouring differences,
/// applied by [`Normal::apply`]; its tridiagonal preconditioner (the
/// diagonal of `AᵀA` plus the penalty's three diagonals) kept factored.
pub(super) struct Normal<'a> {
    sys: &'a System,
    smooth: f64,
    /// `LDLᵀ` of the preconditioner: one over each pivot, and the
    /// subdiagonal multipliers (`mult[m]` below row `m − 1`; the first and
    /// one past the last are 0).
    inv_pivot: Vec<f64>,
    mult: Vec<f64>,
    /// Scratch: the running sums (`n + 1`) and the row values.
    prefix: Vec<f64>,
    values: Vec<f64>,
}

/// The ridge added to the diagonal, which keeps the matrix positive
/// definite when an interval has no queries and no neighbour.
pub(super) const RIDGE: f64 = 1e-9;

impl System {
    pub(super) fn n(&self) -> usize {
        self.q.len()
    }

    /// `A x` into `out` (one value per row), with `prefix` as scratch.
    pub(super) fn apply(&self, x: &[f64], prefix: &mut Vec<f64>, out: &mut Vec<f64>) {
        prefix.clear();
        prefix.push(0.0);
        let mut s = 0.0;
        for (q, x) in self.q.iter().zip(x) {
            s += q * x;
            prefix.push(s);
        }
        out.clear();
        out.extend(self.rows.iter().map(|r| {
            (r.frac * self.q[r.first] * x[r.first] + prefix[r.last + 1] - prefix[r.first + 1])
                * r.inv
        }));
    }

    /// `Aᵀ(t / D)`, interval by interval from the last (`each(m, value)`),
    /// given `t_k / D_k` per row. Interval `m` takes the rows whose
    /// windows hold it whole (`first < m ≤ last`: those ending at or after
    /// it less those starting at or after it, both suffixes of the rows,
    /// which run in the order of their ends and of their starts) and the
    /// fraction of those starting at it: two running sums, no scratch.
    fn sweep_t(&self, t: &[f64], mut each: impl FnMut(usize, f64)) {
        let rows = &self.rows;
        let (mut a, mut b) = (rows.len(), rows.len());
        let (mut ending, mut starting) = (0.0, 0.0);
        for m in (0..self.q.len()).rev() {
            while a > 0 && rows[a - 1].last >= m {
                a -= 1;
                ending += t[a];
            }
            let mut part = 0.0;
            while b > 0 && rows[b - 1].first >= m {
                b -= 1;
                starting += t[b];
                part += rows[b].frac * t[b];
            }
            each(m, self.q[m] * (ending - starting + part));
        }
    }

    /// The diagonal of `AᵀA`: interval `m`'s squared coefficient summed
    /// over the rows that hold it.
    fn gram_diagonal(&self) -> Vec<f64> {
        let n = self.n();
        let mut diff = vec![0.0; n + 1];
        let mut extra = vec![0.0; n];
        for r in &self.rows {
            let t = r.inv * r.inv;
            extra[r.first] += r.frac * r.frac * t;
            diff[r.first + 1] += t;
            diff[r.last + 1] -= t;
        }
        let mut s = 0.0;
        (0..n)
            .map(|m| {
                s += diff[m];
                self.q[m] * self.q[m] * (s + extra[m])
            })
            .collect()
    }

    /// `Aᵀy`, the normal equations' right-hand side.
    pub(super) fn rhs(&self) -> Vec<f64> {
        let t: Vec<f64> = self
            .rows
            .iter()
            .zip(&self.target)
            .map(|(r, y)| y * r.inv)
            .collect();
        let mut out = vec![0.0; self.n()];
        self.sweep_t(&t, |m, v| out[m] = v);
        out
    }
}

impl<'a> Normal<'a> {
    pub(super) fn new(sys: &'a System, smooth: f64) -> Normal<'a> {
        let n = sys.n();
        let diag = sys.gram_diagonal();
        // The tridiagonal `M`: diagonal `g_m + RIDGE + smooth·(neighbours)`,
        // off-diagonal `−smooth`, factored `L·diag(pivot)·Lᵀ`.
        let mut inv_pivot = Vec::with_capacity(n);
        let mut mult = Vec::with_capacity(n + 1);
        let mut pivot = 0.0;
        for (m, g) in diag.iter().enumerate() {
            let neighbours = usize::from(m > 0) + usize::from(m + 1 < n);
            let d = g + RIDGE + smooth * neighbours as f64;
            let l = if m == 0 { 0.0 } else { -smooth / pivot };
            pivot = d - l * l * pivot;
            mult.push(l);
            inv_pivot.push(1.0 / pivot);
        }
        mult.push(0.0);
        Normal {
            sys,
            smooth,
            inv_pivot,
            mult,
            prefix: Vec::with_capacity(n + 1),
            values: Vec::with_capacity(sys.rows.len()),
        }
    }

    /// `H x` into `out`; returns `xᵀHx`.
    fn apply(&mut self, x: &[f64], out: &mut [f64]) -> f64 {
        let n = x.len();
        self.sys.apply(x, &mut self.prefix, &mut self.values);
        for (v, r) in self.values.iter_mut().zip(&self.sys.rows) {
            *v *= r.inv;
        }
        let smooth = self.smooth;
        let mut xhx = 0.0;
        self.sys.sweep_t(&self.values, |m, g| {
            let mut d = RIDGE * x[m];
            if m > 0 {
                d += smooth * (x[m] - x[m - 1]);
            }
            if m + 1 < n {
                d += smooth * (x[m] - x[m + 1]);
            }
            out[m] = g + d;
            xhx += x[m] * out[m];
        });
        xhx
    }

    /// `z = M⁻¹ r` (the tridiagonal preconditioner), after `x += α·p`
    /// and `r −= α·hp`, in the same two passes; returns `(rᵀr, rᵀz)`.
    fn step(
        &self,
        alpha: f64,
        p: &[f64],
        hp: &[f64],
        x: &mut [f64],
        r: &mut [f64],
        z: &mut [f64],
    ) -> (f64, f64) {
        let n = r.len();
        let (mut rr, mut prev) = (0.0, 0.0);
        for m in 0..n {
            x[m] += alpha * p[m];
            let rm = r[m] - alpha * hp[m];
            r[m] = rm;
            rr += rm * rm;
            prev = rm - self.mult[m] * prev;
            z[m] = prev;
        }
        let (mut rz, mut next) = (0.0, 0.0);
        for m in (0..n).rev() {
            next = z[m] * self.inv_pivot[m] - self.mult[m + 1] * next;
            z[m] = next;
            rz += r[m] * next;
        }
        (rr, rz)
    }

    /// `H x = b` by preconditioned conjugate gradients from `x` (the
    /// start, the solution on return) until the residual's norm is at
    /// most `tol` times `b`'s: the iterations taken, or `None` when it
    /// does not get there in `max_iter` iterations (or the matrix shows
    /// itself not positive definite).
    pub(super) fn solve(
        &mut self,
        b: &[f64],
        x: &mut [f64],
        tol: f64,
        max_iter: usize,
    ) -> Option<usize> {
        let n = b.len();
        let norm_b = dot(b, b).sqrt();
        if norm_b == 0.0 {
            x.iter_mut().for_each(|v| *v = 0.0);
            return Some(0);
        }
        let mut r = b.to_vec();
        let mut hp = vec![0.0; n];
        if x.iter().any(|v| *v != 0.0) {
            self.apply(x, &mut hp);
            for (r, h) in r.iter_mut().zip(&hp) {
                *r -= h;
            }
        }
        let mut z = vec![0.0; n];
        let (mut rr, mut rz) = self.step(0.0, &hp, &hp, x, &mut r, &mut z);
        let mut p = z.clone();
        let bound = (tol * norm_b).powi(2);
        for it in 0..=max_iter {
            if rr <= bound {
                return Some(it);
            }
            let php = self.apply(&p, &mut hp);
            if php <= 0.0 || !php.is_finite() {
                return None;
            }
            let alpha = rz / php;
            let (rr_next, rz_next) = self.step(alpha, &p, &hp, x, &mut r, &mut z);
            let beta = rz_next / rz;
            (rr, rz) = (rr_next, rz_next);
            for (p, z) in p.iter_mut().zip(&z) {
                *p = z + beta * *p;
            }
        }
        None
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}
