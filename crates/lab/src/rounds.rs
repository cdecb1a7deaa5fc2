//! The round scheduler. A round measures every (variant, test) cell
//! once, in a shuffled order, so that whatever the machine does over
//! time (a neighbour, steal, heat) falls on every variant alike and
//! each round yields one ratio per variant against the baseline. After
//! the rule's first rounds, only the tests with a variant whose interval
//! is still too wide go on (that variant and the baseline), until every
//! interval is narrow enough, the rounds run out or the budget does. A
//! caller that compares other pairs than the baseline's (an article's
//! findings) names instead which cells its open questions still need.
//!
//! The scheduler knows cells and figures only; what a measurement is
//! (tools, namespaces) is the caller's closure, so its logic is tested on
//! synthetic figures here.

use crate::stats::{Ratio, Rule};
use std::collections::HashSet;

/// One (variant, test) of a run, by their indices in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cell {
    pub v: usize,
    pub t: usize,
}

/// The primary figure of every cell in every round (None: not measured
/// in that round).
#[derive(Debug, Clone, Default)]
pub struct Grid {
    values: Vec<Vec<Vec<Option<f64>>>>,
}

impl Grid {
    pub fn new(variants: usize, tests: usize) -> Grid {
        Grid {
            values: vec![vec![Vec::new(); tests]; variants],
        }
    }

    pub fn record(&mut self, round: usize, c: Cell, x: f64) {
        let row = &mut self.values[c.v][c.t];
        if row.len() <= round {
            row.resize(round + 1, None);
        }
        row[round] = Some(x);
    }

    fn at(&self, c: Cell, round: usize) -> Option<f64> {
        self.values[c.v][c.t].get(round).copied().flatten()
    }

    /// The per-round ratios of `c` against the baseline `base` in the
    /// rounds where both were measured.
    pub fn ratios(&self, base: usize, c: Cell) -> Vec<f64> {
        let b = Cell { v: base, t: c.t };
        (0..self.values[c.v][c.t].len())
            .filter_map(|r| Some(self.at(c, r)? / self.at(b, r)?))
            .collect()
    }
}

/// Decides what each round measures.
#[derive(Debug)]
pub struct Scheduler {
    rule: Rule,
    /// The baseline's variant index; None: no pairing (a fixed number of
    /// rounds).
    base: Option<usize>,
    cells: Vec<Cell>,
    failed: HashSet<Cell>,
    rng: fastrand::Rng,
    /// Rounds begun so far.
    pub round: usize,
    pub grid: Grid,
    /// The budget ended the rounds.
    pub budget_spent: bool,
}

impl Scheduler {
    /// Cells for every test of each variant in `variants` (indices out of
    /// `n_variants`), `tests` tests, paired against `base` when given.
    pub fn new(
        n_variants: usize,
        variants: &[usize],
        tests: usize,
        base: Option<usize>,
        rule: Rule,
        seed: u64,
    ) -> Scheduler {
        let cells = variants
            .iter()
            .flat_map(|&v| (0..tests).map(move |t| Cell { v, t }))
            .collect();
        Scheduler {
            rule,
            base: base.filter(|b| variants.contains(b)),
            cells,
            failed: HashSet::new(),
            rng: fastrand::Rng::with_seed(seed),
            round: 0,
            grid: Grid::new(n_variants, tests),
            budget_spent: false,
        }
    }

    /// A cell failed: it is measured no more.
    pub fn fail(&mut self, c: Cell) {
        self.failed.insert(c);
    }

    pub fn failed(&self, c: Cell) -> bool {
        self.failed.contains(&c)
    }

    /// `c`'s ratio against the baseline so far.
    pub fn ratio(&self, c: Cell) -> Option<Ratio> {
        let b = self.base?;
        Ratio::of(&self.grid.ratios(b, c))
    }

    /// Whether `c` needs no more rounds: its interval is within the rule
    /// (the baseline: every other variant of its test is settled).
    pub fn settled(&self, c: Cell) -> bool {
        let Some(b) = self.base else {
            return self.round >= self.rule.min_rounds;
        };
        if self.failed(Cell { v: b, t: c.t }) {
            return false;
        }
        if c.v == b {
            return self
                .cells
                .iter()
                .filter(|x| x.t == c.t && x.v != b && !self.failed(**x))
                .all(|x| self.settled(*x));
        }
        self.ratio(c)
            .is_some_and(|r| r.half_width_pct() <= self.rule.max_ci_pct)
    }

    /// The cells of the next round, shuffled; None when the run is done.
    /// Past the rule's first rounds, `open` may name the cells still
    /// needed (a caller's own rule; those of them still measured are
    /// taken), or give None for the baseline rule. The round counts as
    /// begun only with [`Scheduler::begin`].
    pub fn next_round(&mut self, open: impl FnOnce() -> Option<Vec<Cell>>) -> Option<Vec<Cell>> {
        if self.round >= self.rule.max_rounds.max(self.rule.min_rounds) {
            return None;
        }
        let live = |c: &&Cell| !self.failed(**c);
        let wanted = if self.round < self.rule.min_rounds {
            None
        } else {
            open()
        };
        let mut cells: Vec<Cell> = if self.round < self.rule.min_rounds {
            self.cells.iter().filter(live).copied().collect()
        } else if let Some(wanted) = wanted {
            let wanted: HashSet<Cell> = wanted.into_iter().collect();
            self.cells
                .iter()
                .filter(live)
                .filter(|c| wanted.contains(c))
                .copied()
                .collect()
        } else if let Some(b) = self.base {
            let mut v: Vec<Cell> = self
                .cells
                .iter()
                .filter(live)
                .filter(|c| c.v != b && !self.failed(Cell { v: b, t: c.t }) && !self.settled(**c))
                .copied()
                .collect();
            let tests: HashSet<usize> = v.iter().map(|c| c.t).collect();
            v.extend(tests.into_iter().map(|t| Cell { v: b, t }));
            v
        } else {
            Vec::new()
        };
        if cells.is_empty() {
            return None;
        }
        cells.sort_by_key(|c| (c.t, c.v));
        self.rng.shuffle(&mut cells);
        Some(cells)
    }

    /// Count the round [`Scheduler::next_round`] gave as begun.
    pub fn begin(&mut self) -> usize {
        self.round += 1;
        self.round - 1
    }
}

/// Run rounds until the scheduler is done: `fits(n)` says whether a
/// round of `n` samples still fits the budget (asked only beyond the
/// rule's first rounds, which are always taken), `measure(round, cell)`
/// takes one sample and returns its primary figure (None: the cell
/// failed and is measured no more), `open()` names the cells still needed
/// past the first rounds (None: the baseline rule decides).
pub fn drive(
    s: &mut Scheduler,
    mut fits: impl FnMut(usize) -> bool,
    mut measure: impl FnMut(usize, Cell) -> Option<f64>,
    mut stop: impl FnMut() -> bool,
    mut open: impl FnMut() -> Option<Vec<Cell>>,
) {
    while let Some(cells) = s.next_round(&mut open) {
        if s.round >= s.rule.min_rounds && !fits(cells.len()) {
            s.budget_spent = true;
            return;
        }
        let round = s.begin();
        for c in cells {
            if s.failed(c) {
                continue;
            }
            match measure(round, c) {
                Some(x) => s.grid.record(round, c, x),
                None => s.fail(c),
            }
            if stop() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(min: usize, max: usize) -> Rule {
        Rule::rounds(min, max)
    }

    /// Keep which cells each round measured.
    fn note(rounds: &mut Vec<Vec<Cell>>, round: usize, c: Cell) {
        if rounds.len() <= round {
            rounds.push(Vec::new());
        }
        rounds[round].push(c);
    }

    #[test]
    fn a_round_measures_every_cell_once_in_a_new_order() {
        let mut s = Scheduler::new(3, &[0, 1, 2], 2, Some(1), rule(3, 3), 7);
        let mut orders = Vec::new();
        drive(
            &mut s,
            |_| true,
            |round, c| {
                note(&mut orders, round, c);
                Some(1.0)
            },
            || false,
            || None,
        );
        assert_eq!(orders.len(), 3);
        for o in &orders {
            let mut sorted = o.clone();
            sorted.sort_by_key(|c| (c.v, c.t));
            let all: Vec<Cell> = (0..3)
                .flat_map(|v| (0..2).map(move |t| Cell { v, t }))
                .collect();
            assert_eq!(sorted, all);
        }
        assert!(
            orders[0] != orders[1] || orders[1] != orders[2],
            "{orders:?}"
        );
        // The same seed gives the same orders.
        let mut again = Scheduler::new(3, &[0, 1, 2], 2, Some(1), rule(3, 3), 7);
        assert_eq!(again.next_round(|| None), Some(orders[0].clone()));
    }

    /// Each test's figure: the variant's true value, times a drift of the
    /// machine with time (one step a sample), times noise.
    fn synthetic(truth: &[f64], drift: f64) -> impl FnMut(usize, Cell) -> Option<f64> + '_ {
        let mut clock = 0.0;
        move |_, c| {
            clock += 1.0;
            Some(truth[c.v] * (1.0 + drift * clock))
        }
    }

    #[test]
    fn interleaved_rounds_cancel_a_drift_that_biases_a_sequential_ratio() {
        // Variant 1 is truly 1.10x the baseline 0; the machine slows 1 %
        // per sample. Sequentially (all of 0's samples, then all of 1's)
        // the ratio comes out far from 1.10.
        let truth = [100.0, 110.0];
        let drift = -0.01;
        let n = 8;
        let mut m = synthetic(&truth, drift);
        let a: Vec<f64> = (0..n).map(|_| m(0, Cell { v: 0, t: 0 }).unwrap()).collect();
        let b: Vec<f64> = (0..n).map(|_| m(0, Cell { v: 1, t: 0 }).unwrap()).collect();
        let seq = b.iter().sum::<f64>() / a.iter().sum::<f64>();
        assert!((seq / 1.10 - 1.0).abs() > 0.05, "sequential {seq}");
        // In shuffled rounds each pair is one or two samples apart.
        let mut s = Scheduler::new(2, &[0, 1], 1, Some(0), rule(n, n), 3);
        drive(
            &mut s,
            |_| true,
            synthetic(&truth, drift),
            || false,
            || None,
        );
        let r = s.ratio(Cell { v: 1, t: 0 }).unwrap();
        assert!((r.ratio / 1.10 - 1.0).abs() < 0.01, "{r:?}");
        assert!(r.lo <= 1.10 && 1.10 <= r.hi, "{r:?}");
    }

    #[test]
    fn rounds_go_on_only_where_an_interval_is_too_wide() {
        // Test 0: steady. Test 1: variant 2 swings by 20 % round to round.
        let mut rng = fastrand::Rng::with_seed(1);
        let mut s = Scheduler::new(3, &[0, 1, 2], 2, Some(0), rule(4, 12), 5);
        let mut per_round: Vec<Vec<Cell>> = Vec::new();
        drive(
            &mut s,
            |_| true,
            |round, c| {
                note(&mut per_round, round, c);
                let noise = if c == (Cell { v: 2, t: 1 }) {
                    0.8 + 0.4 * rng.f64()
                } else {
                    1.0
                };
                Some(100.0 * noise)
            },
            || false,
            || None,
        );
        assert_eq!(per_round[0].len(), 6);
        // After the first four rounds: the noisy cell and its baseline.
        for r in &per_round[4..] {
            let mut r = r.clone();
            r.sort_by_key(|c| c.v);
            assert_eq!(r, vec![Cell { v: 0, t: 1 }, Cell { v: 2, t: 1 }]);
        }
        assert!(s.settled(Cell { v: 1, t: 0 }));
        assert!(s.settled(Cell { v: 0, t: 0 }));
        let done = s.settled(Cell { v: 2, t: 1 });
        assert!(done || s.round == 12, "round {}", s.round);
    }

    #[test]
    fn a_failed_cell_is_dropped_and_the_budget_ends_the_rounds() {
        let mut s = Scheduler::new(2, &[0, 1], 2, Some(0), rule(2, 50), 1);
        let mut rng = fastrand::Rng::with_seed(9);
        let mut rounds_fitting = 3;
        drive(
            &mut s,
            |_| {
                rounds_fitting -= 1;
                rounds_fitting >= 0
            },
            |_, c| {
                if c == (Cell { v: 1, t: 1 }) {
                    return None;
                }
                Some(100.0 * (0.7 + 0.6 * rng.f64()))
            },
            || false,
            || None,
        );
        assert!(s.failed(Cell { v: 1, t: 1 }));
        assert!(s.budget_spent);
        // The first two rounds are always taken: the budget was asked
        // three times after them.
        assert_eq!(s.round, 5);
        // Only the failed cell's row is short: it ran once.
        assert_eq!(s.grid.ratios(0, Cell { v: 1, t: 1 }).len(), 0);
        assert_eq!(s.grid.ratios(0, Cell { v: 1, t: 0 }).len(), 5);
    }

    #[test]
    fn without_a_baseline_the_first_rounds_are_all() {
        let mut s = Scheduler::new(2, &[1], 2, None, rule(3, 40), 1);
        let mut n = 0;
        drive(
            &mut s,
            |_| true,
            |_, c| {
                assert_eq!(c.v, 1);
                n += 1;
                Some(1.0)
            },
            || false,
            || None,
        );
        assert_eq!((s.round, n), (3, 6));
    }

    #[test]
    fn a_callers_open_cells_replace_the_baseline_rule() {
        // Three variants, two tests; past the first 3 rounds the caller
        // wants only (1, 0) against (2, 0), for two more rounds, then
        // nothing: the run ends though every interval is wide.
        let mut s = Scheduler::new(3, &[0, 1, 2], 2, Some(0), rule(3, 20), 4);
        let mut rng = fastrand::Rng::with_seed(2);
        let mut per_round: Vec<Vec<Cell>> = Vec::new();
        let mut asked = 0;
        let focus = [Cell { v: 1, t: 0 }, Cell { v: 2, t: 0 }];
        drive(
            &mut s,
            |_| true,
            |round, c| {
                note(&mut per_round, round, c);
                Some(100.0 * (0.5 + rng.f64()))
            },
            || false,
            || {
                asked += 1;
                Some(if asked <= 2 {
                    focus.to_vec()
                } else {
                    Vec::new()
                })
            },
        );
        assert_eq!(per_round.len(), 5);
        assert!(per_round[..3].iter().all(|r| r.len() == 6));
        for r in &per_round[3..] {
            let mut r = r.clone();
            r.sort_by_key(|c| c.v);
            assert_eq!(r, focus);
        }
        assert!(!s.settled(Cell { v: 1, t: 1 }));
    }
}
