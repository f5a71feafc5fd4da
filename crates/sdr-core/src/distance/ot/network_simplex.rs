//! Primal network simplex for the dense transportation problem
//!
//! $$\min_{\gamma\ge 0}\ \sum_{i,j}\gamma_{ij}C_{ij}\quad\text{s.t.}\quad
//!   \gamma\mathbf 1 = \mathbf s,\ \ \gamma^\top\mathbf 1 = \mathbf d,
//!   \qquad \textstyle\sum_i s_i = \sum_j d_j$$
//!
//! on the complete bipartite graph rows -> columns, plus one artificial root
//! node. Design follows the textbook method \[1, ch. 11\] as also used by LEMON
//! and POT \[2\]:
//!
//! - the initial basis is a greedy row-minimum solution (a forest), each of
//!   whose trees hangs below an artificial root through a zero-cost arc
//!   `node -> root`; as the root has no supply and all artificial arcs point
//!   to it, their flow is 0 throughout, so no big-M cost is needed;
//! - entering arcs by block search pricing (blocks of ~sqrt(#arcs) arcs);
//! - leaving arcs by Cunningham's strongly feasible tree rule (the last
//!   blocking arc on the cycle, walked from the apex in the direction of the
//!   entering arc), which rules out cycling on degenerate pivots;
//! - the tree is kept as parent pointers, depths and potentials, with
//!   undirected adjacency lists so that only the re-hung subtree is revisited
//!   after a pivot.
//!
//! Non-tree arcs carry no flow (all arcs are uncapacitated), so flows are
//! stored on the `N - 1` tree edges only and memory is `O(n + m)` besides
//! the dense row-major costs. Flows are exact when the masses are integers
//! (as `ot_distance` arranges), otherwise rounded like any float LP solver.
//!
//! References:
//! 1. R. K. Ahuja, T. L. Magnanti, J. B. Orlin (1993). *Network Flows*,
//!    Prentice Hall, ch. 11 (network simplex, strongly feasible spanning trees).
//! 2. N. Bonneel, M. van de Panne, S. Paris, W. Heidrich (2011). Displacement
//!    interpolation using Lagrangian mass transport. *ACM TOG* 30(6) (POT's
//!    `emd`, built on LEMON's network simplex).

use std::cell::RefCell;

use crate::distance::stop::Stop;
use crate::error::Result;

const NONE: u32 = u32::MAX;

/// Pivots between two reads of the stop flag: a fraction of a millisecond on
/// thousands of rows, and one read for the few pivots of report-sized sets.
const PIVOTS_PER_CHECK: usize = 256;

/// Reusable buffers: one per thread, grown on demand, so that solving many
/// small problems does not allocate.
#[derive(Default)]
pub(crate) struct Workspace {
    // Per node (rows 0..n, columns n..n+m, root n+m).
    parent: Vec<u32>,
    pslot: Vec<u32>,
    depth: Vec<u32>,
    pi: Vec<f64>,
    head: Vec<u32>,
    // Per tree edge ("slot"): the arc, its cost and flow.
    src: Vec<u32>,
    dst: Vec<u32>,
    cost: Vec<f64>,
    flow: Vec<f64>,
    // Half-edges 2s (at src) and 2s+1 (at dst): doubly linked adjacency lists.
    next: Vec<u32>,
    prev: Vec<u32>,
    stack: Vec<u32>,
    // Demand left per column while building the initial basis.
    rem: Vec<f64>,
}

thread_local! {
    static WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::default());
}

/// Run `f` with this thread's workspace.
pub(crate) fn with_workspace<R>(f: impl FnOnce(&mut Workspace) -> R) -> R {
    WORKSPACE.with(|ws| match ws.try_borrow_mut() {
        Ok(mut ws) => f(&mut ws),
        // Re-entrant use (not expected): fall back to a fresh workspace.
        Err(_) => f(&mut Workspace::default()),
    })
}

/// Outcome of [`solve`]; the flows stay in the workspace (see [`Workspace::plan`]).
pub(crate) struct Outcome {
    /// `sum_ij gamma_ij C_ij` over the real arcs.
    pub value: f64,
    pub pivots: usize,
    /// Optimality reached (no arc with reduced cost below the tolerance and
    /// no flow left on artificial arcs) within `max_pivots`.
    pub converged: bool,
}

impl Workspace {
    fn reset(&mut self, nodes: usize) {
        let slots = nodes - 1;
        for v in [
            &mut self.parent,
            &mut self.pslot,
            &mut self.depth,
            &mut self.head,
        ] {
            v.clear();
            v.resize(nodes, NONE);
        }
        self.pi.clear();
        self.pi.resize(nodes, 0.0);
        for v in [&mut self.src, &mut self.dst] {
            v.clear();
            v.resize(slots, NONE);
        }
        self.cost.clear();
        self.cost.resize(slots, 0.0);
        self.flow.clear();
        self.flow.resize(slots, 0.0);
        for v in [&mut self.next, &mut self.prev] {
            v.clear();
            v.resize(2 * slots, NONE);
        }
        self.stack.clear();
    }

    #[inline]
    fn link(&mut self, node: u32, half: u32) {
        let h = self.head[node as usize];
        self.next[half as usize] = h;
        self.prev[half as usize] = NONE;
        if h != NONE {
            self.prev[h as usize] = half;
        }
        self.head[node as usize] = half;
    }

    #[inline]
    fn unlink(&mut self, node: u32, half: u32) {
        let (p, n) = (self.prev[half as usize], self.next[half as usize]);
        if p == NONE {
            self.head[node as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
    }

    fn set_slot(&mut self, s: u32, src: u32, dst: u32, cost: f64, flow: f64) {
        let k = s as usize;
        self.src[k] = src;
        self.dst[k] = dst;
        self.cost[k] = cost;
        self.flow[k] = flow;
        self.link(src, 2 * s);
        self.link(dst, 2 * s + 1);
    }

    /// Hang the subtree containing `top` below `parent` through slot `s`,
    /// recomputing parents, depths and potentials (tree arcs have zero
    /// reduced cost `c + pi_src - pi_dst`).
    fn rehang(&mut self, top: u32, parent: u32, s: u32) {
        self.stack.clear();
        self.stack.push(top);
        self.parent[top as usize] = parent;
        self.pslot[top as usize] = s;
        while let Some(u) = self.stack.pop() {
            let uu = u as usize;
            let p = self.parent[uu] as usize;
            let ps = self.pslot[uu] as usize;
            self.depth[uu] = self.depth[p] + 1;
            self.pi[uu] = if self.src[ps] == u {
                self.pi[p] - self.cost[ps]
            } else {
                self.pi[p] + self.cost[ps]
            };
            let mut h = self.head[uu];
            while h != NONE {
                let s2 = h >> 1;
                if s2 as usize != ps {
                    let w = if h & 1 == 0 {
                        self.dst[s2 as usize]
                    } else {
                        self.src[s2 as usize]
                    };
                    self.parent[w as usize] = u;
                    self.pslot[w as usize] = s2;
                    self.stack.push(w);
                }
                h = self.next[h as usize];
            }
        }
    }

    /// Flows on real arcs as a dense row-major `n x m` plan.
    pub(crate) fn plan(&self, n: usize, m: usize) -> Vec<f64> {
        let mut plan = vec![0.0; n * m];
        for s in 0..self.src.len() {
            let (a, b) = (self.src[s] as usize, self.dst[s] as usize);
            if a < n && b >= n && b < n + m {
                plan[a * m + (b - n)] += self.flow[s];
            }
        }
        plan
    }
}

/// A transportation problem: `n` supplies `s(i) > 0`, `m` demands
/// `d(j) > 0` with the same total, finite costs `cost[i * m + j]`.
pub(crate) struct Problem<'a, S, D> {
    pub n: usize,
    pub m: usize,
    pub s: S,
    pub d: D,
    pub cost: &'a [f64],
}

/// Solve `pb`; stops after `max_pivots` pivots (then `converged` is false and
/// the flows are feasible but possibly suboptimal).
///
/// # Errors
/// [`crate::SdrError::Stopped`] once `stop` is set (read every
/// [`PIVOTS_PER_CHECK`] pivots).
pub(crate) fn solve<S, D>(
    ws: &mut Workspace,
    pb: Problem<'_, S, D>,
    max_pivots: usize,
    stop: Stop<'_>,
) -> Result<Outcome>
where
    S: Fn(usize) -> f64,
    D: Fn(usize) -> f64,
{
    let Problem { n, m, s, d, cost } = pb;
    assert_eq!(cost.len(), n * m, "cost matrix of the wrong size");
    let nodes = n + m + 1;
    let root = (n + m) as u32;
    ws.reset(nodes);

    let cmax = cost.iter().fold(0.0f64, |a, c| a.max(c.abs()));
    // Potentials are sums of a few costs, exact up to rounding at the scale
    // of the costs; arcs must beat that noise to enter.
    let tol = 1e-12 * cmax.max(f64::MIN_POSITIVE);

    // Initial basis, greedy by row minima: each row in turn ships its supply
    // to its cheapest columns with demand left. Every allocation exhausts a
    // row or a column, which then gets no further edge, so the edges form a
    // forest, and each of its trees is balanced.
    ws.rem.clear();
    ws.rem.extend((0..m).map(&d));
    let mut total = 0.0;
    let mut slots = 0u32;
    for i in 0..n {
        let mut left = s(i);
        total += left;
        let row = &cost[i * m..(i + 1) * m];
        while left > 0.0 {
            let mut best = NONE as usize;
            let mut best_c = f64::INFINITY;
            for (j, (&c, &r)) in row.iter().zip(&ws.rem).enumerate() {
                if r > 0.0 && (c < best_c || best == NONE as usize) {
                    best_c = c;
                    best = j;
                }
            }
            if best == NONE as usize {
                break; // only rounding residue left
            }
            let f = if left <= ws.rem[best] {
                let f = left;
                ws.rem[best] -= f;
                left = 0.0;
                f
            } else {
                let f = ws.rem[best];
                ws.rem[best] = 0.0;
                left -= f;
                f
            };
            ws.set_slot(slots, i as u32, (n + best) as u32, best_c, f);
            slots += 1;
        }
    }
    // Hang every tree of the forest below the root through an artificial arc
    // `node -> root` of cost 0 and flow 0. All artificial arcs point to the
    // root and the root has no supply, so their flows stay 0 for good; the
    // tree is strongly feasible (every zero-flow arc points to the root).
    ws.depth[root as usize] = 0;
    ws.pi[root as usize] = 0.0;
    for u in 0..(n + m) as u32 {
        if ws.parent[u as usize] == NONE {
            ws.set_slot(slots, u, root, 0.0, 0.0);
            ws.rehang(u, root, slots);
            slots += 1;
        }
    }
    debug_assert_eq!(slots as usize, nodes - 1);

    // Block search pricing over whole rows: scan `rows_per_block` rows
    // (~sqrt(#arcs) arcs) cyclically from where the last search stopped and
    // take the most negative reduced cost seen once a block has one.
    let arcs = n * m;
    let block = ((arcs as f64).sqrt().ceil() as usize).max(10);
    let rows_per_block = block.div_ceil(m).clamp(1, n);
    let mut next_row = 0usize;
    let mut pivots = 0usize;
    let mut converged = false;

    while pivots < max_pivots {
        if pivots.is_multiple_of(PIVOTS_PER_CHECK) {
            stop.check()?;
        }
        let mut best = -tol;
        let mut entering: Option<(usize, usize)> = None;
        let (pi_rows, pi_cols) = ws.pi.split_at(n);
        let pi_cols = &pi_cols[..m];
        let mut i = next_row;
        for scanned in 1..=n {
            let row = &cost[i * m..(i + 1) * m];
            let pi_i = pi_rows[i];
            for (j, (&c, &pj)) in row.iter().zip(pi_cols).enumerate() {
                let rc = c + pi_i - pj;
                if rc < best {
                    best = rc;
                    entering = Some((i, j));
                }
            }
            i = if i + 1 == n { 0 } else { i + 1 };
            if scanned % rows_per_block == 0 && entering.is_some() {
                break;
            }
        }
        let Some((ei, ej)) = entering else {
            converged = true;
            break;
        };
        next_row = i;
        pivots += 1;

        // Cycle: entering arc a -> b, then the tree path b -> apex -> a.
        let (a, b) = (ei as u32, (n + ej) as u32);
        let (mut x, mut y) = (a, b);
        while x != y {
            if ws.depth[x as usize] >= ws.depth[y as usize] {
                x = ws.parent[x as usize];
            } else {
                y = ws.parent[y as usize];
            }
        }
        let apex = x;

        // Leaving arc: on a's side arcs pointing up lose flow, on b's side
        // arcs pointing down do. Strongly feasible rule: strict on a's side
        // (deepest wins), non-strict on b's side (closest to the apex wins,
        // and b's side wins ties).
        let mut delta = f64::INFINITY;
        let mut out = NONE; // child node of the leaving tree edge
        let mut out_on_a = true;
        let mut u = a;
        while u != apex {
            let ps = ws.pslot[u as usize] as usize;
            if ws.src[ps] == u && ws.flow[ps] < delta {
                delta = ws.flow[ps];
                out = u;
            }
            u = ws.parent[u as usize];
        }
        let mut u = b;
        while u != apex {
            let ps = ws.pslot[u as usize] as usize;
            if ws.dst[ps] == u && ws.flow[ps] <= delta {
                delta = ws.flow[ps];
                out = u;
                out_on_a = false;
            }
            u = ws.parent[u as usize];
        }
        if out == NONE {
            // A cycle without a backward arc would be a directed negative
            // cycle: impossible with arcs rows -> columns only.
            break;
        }

        // Push delta around the cycle.
        if delta > 0.0 {
            let mut u = a;
            while u != apex {
                let ps = ws.pslot[u as usize] as usize;
                if ws.src[ps] == u {
                    ws.flow[ps] -= delta;
                } else {
                    ws.flow[ps] += delta;
                }
                u = ws.parent[u as usize];
            }
            let mut u = b;
            while u != apex {
                let ps = ws.pslot[u as usize] as usize;
                if ws.dst[ps] == u {
                    ws.flow[ps] -= delta;
                } else {
                    ws.flow[ps] += delta;
                }
                u = ws.parent[u as usize];
            }
        }

        // Swap the leaving edge for the entering arc and re-hang the cut-off
        // subtree (it holds a if the leaving edge was on a's side, else b).
        let slot = ws.pslot[out as usize];
        let (os, od) = (ws.src[slot as usize], ws.dst[slot as usize]);
        ws.unlink(os, 2 * slot);
        ws.unlink(od, 2 * slot + 1);
        ws.set_slot(slot, a, b, cost[ei * m + ej], delta);
        if out_on_a {
            ws.rehang(a, b, slot);
        } else {
            ws.rehang(b, a, slot);
        }
    }

    let mut value = 0.0;
    for k in 0..(nodes - 1) {
        let (x, y) = (ws.src[k] as usize, ws.dst[k] as usize);
        if x < n && y >= n && y < n + m {
            value += ws.flow[k] * ws.cost[k];
        } else if ws.flow[k] > 1e-12 * total {
            // Flow on an artificial arc (impossible, see above): not a solution.
            converged = false;
        }
    }
    Ok(Outcome {
        value,
        pivots,
        converged,
    })
}
