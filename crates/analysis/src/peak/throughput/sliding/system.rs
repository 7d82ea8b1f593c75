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
        self.sys.apply(x, &mut self.prefix, &mut self.values);
        self.apply_rows(x, out)
    }

    /// [`Normal::apply`] given `A x` in `self.values` (which it scales).
    fn apply_rows(&mut self, x: &[f64], out: &mut [f64]) -> f64 {
        let n = x.len();
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

    /// The [`Coarse`] space of blocks of `block` intervals for this
    /// matrix, or `None` when its Galerkin matrix has no Cholesky factor
    /// (rounding: it is positive definite).
    pub(super) fn coarse(&mut self, block: usize) -> Option<Coarse> {
        let sys = self.sys;
        let n = sys.n();
        let block = block.max(1);
        let k = n.div_ceil(block);
        let mut queries = vec![0.0; k];
        for (m, q) in sys.q.iter().enumerate() {
            queries[m / block] += q;
        }
        // Each row's weights on the blocks (`A Z`): its first and last
        // blocks in part, every block between whole.
        let rows = sys
            .rows
            .iter()
            .map(|r| {
                let (bf, bl) = (r.first / block, r.last / block);
                let mut head = r.frac * sys.q[r.first];
                let end = if bf == bl {
                    r.last + 1
                } else {
                    (bf + 1) * block
                };
                head += sys.q[r.first + 1..end].iter().sum::<f64>();
                let tail = if bf == bl {
                    0.0
                } else {
                    sys.q[bl * block..=r.last].iter().sum()
                };
                BlockRow {
                    head_block: bf,
                    tail_block: bl,
                    head: head * r.inv,
                    tail: tail * r.inv,
                }
            })
            .collect();
        let mut z = Coarse {
            block,
            k,
            queries,
            rows,
            inv: Vec::new(),
        };
        // `E = Zᵀ H Z`, a column at a time, made symmetric.
        let mut e = vec![0.0; k * k];
        let (mut unit, mut col, mut scratch) = (vec![0.0; n], vec![0.0; k], vec![0.0; k + 1]);
        for a in 0..k {
            let blk = a * block..((a + 1) * block).min(n);
            unit[blk.clone()].fill(1.0);
            self.coarse_of_h(&z, &unit, &mut col, &mut scratch);
            unit[blk].fill(0.0);
            for (b, v) in col.iter().enumerate() {
                e[b * k + a] = *v;
            }
        }
        symmetrize(&mut e, k);
        if !dense_cholesky(&mut e, k) {
            return None;
        }
        // `E⁻¹` itself (symmetric), a column at a time: a product per
        // iteration then, where the factor takes two triangular solves.
        let mut inv = vec![0.0; k * k];
        for a in 0..k {
            col.iter_mut().for_each(|v| *v = 0.0);
            col[a] = 1.0;
            cholesky_solve(&e, k, &mut col);
            for (b, v) in col.iter().enumerate() {
                inv[b * k + a] = *v;
            }
        }
        symmetrize(&mut inv, k);
        z.inv = inv;
        Some(z)
    }

    /// `Zᵀ H w` into `out` (`k` values; `diff`, `k + 1`, as scratch), in
    /// O(n) without `H w`: `A w` by the running sums, each row's value
    /// spread over its blocks (its two end blocks by their weights, the
    /// blocks between by their queries, through a difference array), the
    /// penalty's differences summed over a block (only its two edges
    /// remain) and the ridge.
    fn coarse_of_h(&mut self, z: &Coarse, w: &[f64], out: &mut [f64], diff: &mut [f64]) {
        let n = w.len();
        self.sys.apply(w, &mut self.prefix, &mut self.values);
        out.iter_mut().for_each(|v| *v = 0.0);
        diff.iter_mut().for_each(|v| *v = 0.0);
        for ((v, r), b) in self.values.iter().zip(&self.sys.rows).zip(&z.rows) {
            out[b.head_block] += v * b.head;
            if b.tail_block > b.head_block {
                out[b.tail_block] += v * b.tail;
                let whole = v * r.inv;
                diff[b.head_block + 1] += whole;
                diff[b.tail_block] -= whole;
            }
        }
        let mut run = 0.0;
        for (a, o) in out.iter_mut().enumerate() {
            run += diff[a];
            let (s, e) = (a * z.block, ((a + 1) * z.block).min(n) - 1);
            let mut edges = 0.0;
            if s > 0 {
                edges += w[s] - w[s - 1];
            }
            if e + 1 < n {
                edges += w[e] - w[e + 1];
            }
            let sum: f64 = w[s..=e].iter().sum();
            *o += z.queries[a] * run + self.smooth * edges + RIDGE * sum;
        }
    }

    /// `H x = b` as [`Normal::solve`], from zero, with the iterations
    /// deflated by the [`Coarse`] space `z` (made by
    /// [`Normal::coarse`] on this matrix): the start `x₀ = Z E⁻¹ Zᵀ b`
    /// solves the system on the coarse space, and each search direction
    /// is made `H`-orthogonal to it (`p = w + β p − Z E⁻¹ Zᵀ H w`, `w`
    /// the preconditioned residual), so the iterations never return to
    /// the smooth directions where `AᵀA` is large and the tridiagonal
    /// preconditioner weak. The same residual rule ends it.
    pub(super) fn solve_deflated(
        &mut self,
        z: &Coarse,
        b: &[f64],
        x: &mut [f64],
        tol: f64,
        max_iter: usize,
    ) -> Option<usize> {
        let n = b.len();
        let norm_b = dot(b, b).sqrt();
        x.iter_mut().for_each(|v| *v = 0.0);
        if norm_b == 0.0 {
            return Some(0);
        }
        let (mut t, mut mu) = (vec![0.0; z.k], vec![0.0; z.k]);
        let mut diff = vec![0.0; z.k + 1];
        for (m, v) in b.iter().enumerate() {
            t[m / z.block] += v;
        }
        z.inverse(&t, &mut mu);
        for (m, x) in x.iter_mut().enumerate() {
            *x = mu[m / z.block];
        }
        let mut hp = vec![0.0; n];
        self.apply(x, &mut hp);
        let mut r: Vec<f64> = b.iter().zip(&hp).map(|(b, h)| b - h).collect();
        hp.iter_mut().for_each(|v| *v = 0.0);
        let mut w = vec![0.0; n];
        let (mut rr, mut rz) = self.step(0.0, &hp, &hp, x, &mut r, &mut w);
        // The direction `p` and `A p` (by rows), kept by the same
        // recurrence: `A p = A w + β A p − (A Z) μ`, `A w` from the
        // coarse product, so that `H p` needs no running sums of its own.
        let mut p = vec![0.0; n];
        let mut ap = vec![0.0; self.sys.rows.len()];
        let mut beta = 0.0;
        let bound = (tol * norm_b).powi(2);
        for it in 0..=max_iter {
            if rr <= bound {
                return Some(it);
            }
            self.coarse_of_h(z, &w, &mut t, &mut diff);
            z.inverse(&t, &mut mu);
            z.direction(&w, beta, &mu, &mut p);
            z.rows_direction(self.sys, &self.values, beta, &mu, &mut diff, &mut ap);
            self.values.clear();
            self.values.extend_from_slice(&ap);
            let php = self.apply_rows(&p, &mut hp);
            if php <= 0.0 || !php.is_finite() {
                return None;
            }
            let alpha = rz / php;
            let (rr_next, rz_next) = self.step(alpha, &p, &hp, x, &mut r, &mut w);
            beta = rz_next / rz;
            (rr, rz) = (rr_next, rz_next);
        }
        None
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

/// A coarse space for deflating the conjugate gradients on `H`
/// ([`Normal::solve_deflated`]): `Z`'s columns are the indicators of
/// consecutive blocks of `block` intervals (`k` of them, the last one
/// shorter). Kept: each block's queries, each row's weights on its end
/// blocks (`A Z` is a row's window over the blocks: whole blocks between
/// its ends) and the inverse of the Galerkin matrix `E = Zᵀ H Z`
/// (`k × k`).
pub(super) struct Coarse {
    block: usize,
    k: usize,
    queries: Vec<f64>,
    rows: Vec<BlockRow>,
    inv: Vec<f64>,
}

/// A row of `A Z` ([`Coarse`]): its first and last blocks and its
/// weights on them (over its window's queries; the same block: all of
/// it in `head`), and one over its window's queries on every block
/// between (their queries).
struct BlockRow {
    head_block: usize,
    tail_block: usize,
    head: f64,
    tail: f64,
}

impl Coarse {
    /// `mu = E⁻¹ t`.
    fn inverse(&self, t: &[f64], mu: &mut [f64]) {
        mu.iter_mut().for_each(|v| *v = 0.0);
        for (col, t) in self.inv.chunks_exact(self.k).zip(t) {
            for (m, e) in mu.iter_mut().zip(col) {
                *m += e * t;
            }
        }
    }

    /// `ap ← aw + beta·ap − (A Z) μ`, row by row (`sums`, `k + 1`, as
    /// scratch: the running sum of the blocks' queries times `μ`).
    fn rows_direction(
        &self,
        sys: &System,
        aw: &[f64],
        beta: f64,
        mu: &[f64],
        sums: &mut [f64],
        ap: &mut [f64],
    ) {
        let mut s = 0.0;
        sums[0] = 0.0;
        for (a, (q, m)) in self.queries.iter().zip(mu).enumerate() {
            s += q * m;
            sums[a + 1] = s;
        }
        for (((ap, aw), b), r) in ap.iter_mut().zip(aw).zip(&self.rows).zip(&sys.rows) {
            let mut zmu = b.head * mu[b.head_block];
            if b.tail_block > b.head_block {
                zmu += b.tail * mu[b.tail_block]
                    + r.inv * (sums[b.tail_block] - sums[b.head_block + 1]);
            }
            *ap = aw + beta * *ap - zmu;
        }
    }

    /// `p ← w + beta·p − Z μ`: the next search direction, `H`-orthogonal
    /// to the coarse space when `μ = E⁻¹ Zᵀ H w`.
    fn direction(&self, w: &[f64], beta: f64, mu: &[f64], p: &mut [f64]) {
        for ((p, w), m) in p.chunks_mut(self.block).zip(w.chunks(self.block)).zip(mu) {
            for (p, w) in p.iter_mut().zip(w) {
                *p = w + beta * *p - m;
            }
        }
    }
}

/// The `k × k` matrix `m` (row-major) made exactly symmetric: each pair
/// of entries across the diagonal set to their mean (they differ by
/// rounding only).
fn symmetrize(m: &mut [f64], k: usize) {
    for a in 0..k {
        for b in 0..a {
            let v = 0.5 * (m[a * k + b] + m[b * k + a]);
            m[a * k + b] = v;
            m[b * k + a] = v;
        }
    }
}

/// `y ← (L Lᵀ)⁻¹ y` with a factor of [`dense_cholesky`].
fn cholesky_solve(l: &[f64], k: usize, y: &mut [f64]) {
    for i in 0..k {
        let s = y[i] - dot(&l[i * k..i * k + i], &y[..i]);
        y[i] = s / l[i * k + i];
    }
    for i in (0..k).rev() {
        let mut s = y[i];
        for j in i + 1..k {
            s -= l[j * k + i] * y[j];
        }
        y[i] = s / l[i * k + i];
    }
}

/// Dense Cholesky in place of the `k × k` symmetric matrix `a` (by rows;
/// the factor in the lower triangle): `false` when not positive definite.
fn dense_cholesky(a: &mut [f64], k: usize) -> bool {
    for j in 0..k {
        let (done, rest) = a.split_at_mut(j * k);
        let rj = &mut rest[..k];
        for i in 0..j {
            let ri = &done[i * k..i * k + k];
            rj[i] = (rj[i] - dot(&ri[..i], &rj[..i])) / ri[i];
        }
        let d = rj[j] - dot(&rj[..j], &rj[..j]);
        if d <= 0.0 || !d.is_finite() {
            return false;
        }
        rj[j] = d.sqrt();
    }
    true
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}
