//! The mix rules: what users ask, watched per series through each line-rate row's question
//! type (`details.question_type`, read from the question alone, so it does not move when only
//! the agent changes). Two mixes are kept: the question types themselves (`question_mix`) and
//! the tables the questions ground to — the subjects of the type's key, `count:atom+molecule`
//! → `atom`, `molecule`; a question's key nouns where there is no catalogue
//! (`question_tables_mix`).
//!
//! Each mix keeps a recent window of rows and the baseline window before it, with the count of
//! every item in each window updated as rows move (nothing is recounted). Every
//! `evaluate_every` rows, with both windows at `min_samples`, it breaches when
//!
//! - **a new item** takes at least `new_question_type_min_share` of the recent window's rows
//!   while it took under a quarter of that share of the baseline's, or
//! - **the mix as a whole moved**: the Jensen–Shannon divergence (bits, 0–1) between the
//!   windows' item distributions is at least `question_mix_divergence` and the G-test of
//!   homogeneity of the two windows' counts has `p < alpha` (χ² with the items present − 1
//!   degrees of freedom, through the Wilson–Hilferty approximation; an approximation where a
//!   question grounds to several tables, since their counts are then not independent).
//!
//! The shared hysteresis fires and resolves it (calm: the new item's share below half the
//! minimum, or it has become usual in the baseline; the divergence below `resolve_ratio` of the
//! threshold). The notification names the new item, or the item whose share moved most, and
//! points at `sqlgrade breakdown --by question_type` (or `--by table`).

use std::collections::{HashMap, VecDeque};

use super::config::RuleSet;
use super::detector::{Hysteresis, Step};
use super::notification::RuleKind;
use super::stats::{Comparison, normal_cdf};

/// Items kept apart per series and mix at most (the rest share one slot).
pub const MAX_ITEMS: usize = 10_000;

/// The slot every item past [`MAX_ITEMS`] shares.
const OTHER: u32 = u32::MAX;

/// Which mix a tracker keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum MixKind {
    /// Question types (`count:molecule`).
    QuestionTypes,
    /// The tables questions ground to (the subjects of their types).
    QuestionTables,
}

impl MixKind {
    /// Both mixes.
    pub(super) const ALL: [MixKind; 2] = [MixKind::QuestionTypes, MixKind::QuestionTables];

    /// The rule that alerts on it.
    pub(super) fn rule(self) -> RuleKind {
        match self {
            MixKind::QuestionTypes => RuleKind::QuestionMix,
            MixKind::QuestionTables => RuleKind::QuestionTablesMix,
        }
    }

    /// What an item is called in a notification.
    pub(super) fn item_noun(self) -> &'static str {
        match self {
            MixKind::QuestionTypes => "question type",
            MixKind::QuestionTables => "table questions ground to",
        }
    }

    /// The metric prefix of an item's share (`question_type_share:<type>`).
    pub(super) fn share_metric(self) -> &'static str {
        match self {
            MixKind::QuestionTypes => "question_type_share",
            MixKind::QuestionTables => "question_table_share",
        }
    }

    /// The metric of the whole mix's divergence.
    pub(super) fn divergence_metric(self) -> &'static str {
        match self {
            MixKind::QuestionTypes => "question_type_divergence",
            MixKind::QuestionTables => "question_table_divergence",
        }
    }

    /// The breakdown that shows the items.
    pub(super) fn breakdown(self) -> &'static str {
        match self {
            MixKind::QuestionTypes => "sqlgrade breakdown --by question_type",
            MixKind::QuestionTables => "sqlgrade breakdown --by table",
        }
    }

    /// A question type's items in this mix.
    pub(super) fn items(self, question_type: &str) -> impl Iterator<Item = &str> {
        let (whole, subjects) = match self {
            MixKind::QuestionTypes => (Some(question_type), None),
            MixKind::QuestionTables => (
                None,
                question_type
                    .split_once(':')
                    .map(|(_, subjects)| subjects.split('+').filter(|s| !s.is_empty())),
            ),
        };
        whole.into_iter().chain(subjects.into_iter().flatten())
    }
}

/// Why a mix is firing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// A new item took a share.
    New(u32),
    /// The mix as a whole moved.
    Divergence,
}

/// One window: its rows' items and the count of each item.
#[derive(Debug, Default)]
struct Window {
    rows: VecDeque<Vec<u32>>,
    counts: HashMap<u32, u32>,
    items: u64,
}

impl Window {
    fn push(&mut self, row: Vec<u32>) {
        for &item in &row {
            *self.counts.entry(item).or_default() += 1;
        }
        self.items += row.len() as u64;
        self.rows.push_back(row);
    }

    fn pop(&mut self) -> Option<Vec<u32>> {
        let row = self.rows.pop_front()?;
        for item in &row {
            if let Some(count) = self.counts.get_mut(item) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(item);
                }
            }
        }
        self.items -= row.len() as u64;
        Some(row)
    }

    /// The share of the window's rows that name `item`.
    fn share(&self, item: u32) -> f64 {
        if self.rows.is_empty() {
            return 0.0;
        }
        f64::from(self.counts.get(&item).copied().unwrap_or(0)) / self.rows.len() as f64
    }
}

/// One series' windows of one mix.
#[derive(Debug)]
pub(super) struct MixTracker {
    kind: MixKind,
    ids: HashMap<String, u32>,
    names: Vec<String>,
    recent: Window,
    baseline: Window,
    since_evaluation: usize,
    pub(super) observations: u64,
    pub(super) hysteresis: Hysteresis,
    firing: Option<Cause>,
}

/// What one evaluation found.
pub(super) struct MixFinding {
    /// The item named: the new one, or the one whose share moved most.
    pub(super) item: String,
    /// Whether the mix fired (or resolved) as a whole rather than on a new item.
    pub(super) divergence: Option<f64>,
    /// The named item's shares, the effect (the share's rise, or the divergence) and the test's
    /// p-value.
    pub(super) comparison: Comparison,
    pub(super) recent_samples: usize,
    pub(super) baseline_samples: usize,
}

impl MixTracker {
    pub(super) fn new(kind: MixKind) -> MixTracker {
        MixTracker {
            kind,
            ids: HashMap::new(),
            names: Vec::new(),
            recent: Window::default(),
            baseline: Window::default(),
            since_evaluation: 0,
            observations: 0,
            hysteresis: Hysteresis::default(),
            firing: None,
        }
    }

    fn id(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        if self.names.len() >= MAX_ITEMS {
            return OTHER;
        }
        let id = self.names.len() as u32;
        self.ids.insert(key.to_string(), id);
        self.names.push(key.to_string());
        id
    }

    fn name(&self, id: u32) -> String {
        self.names
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| "(other)".into())
    }

    /// Add one row's question type; every `evaluate_every` rows with both windows at
    /// `min_samples`, the state change it causes (if any) with what it is about.
    pub(super) fn observe(
        &mut self,
        question_type: &str,
        rules: &RuleSet,
    ) -> Option<(Step, MixFinding)> {
        let mut row: Vec<u32> = Vec::new();
        for item in self.kind.items(question_type) {
            let id = self.id(item);
            if !row.contains(&id) {
                row.push(id);
            }
        }
        self.observations += 1;
        self.recent.push(row);
        if self.recent.rows.len() > rules.recent_window
            && let Some(old) = self.recent.pop()
        {
            self.baseline.push(old);
            if self.baseline.rows.len() > rules.baseline_window {
                self.baseline.pop();
            }
        }
        self.since_evaluation += 1;
        if self.since_evaluation < rules.evaluate_every
            || self.recent.rows.len() < rules.min_samples
            || self.baseline.rows.len() < rules.min_samples
        {
            return None;
        }
        self.since_evaluation = 0;
        self.evaluate(rules)
    }

    fn evaluate(&mut self, rules: &RuleSet) -> Option<(Step, MixFinding)> {
        let min_share = rules.new_question_type_min_share;
        let threshold = rules.question_mix_divergence;
        // The newest-looking item: the largest recent share among those the baseline lacked.
        let candidate = (min_share > 0.0)
            .then(|| {
                self.recent
                    .counts
                    .keys()
                    .filter(|&&t| t != OTHER)
                    .map(|&t| (t, self.recent.share(t)))
                    .filter(|&(t, share)| {
                        share >= min_share && self.baseline.share(t) < min_share / 4.0
                    })
                    .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            })
            .flatten();
        let (divergence, g_p) = if threshold > 0.0 {
            divergence_and_p(&self.recent, &self.baseline)
        } else {
            (0.0, 1.0)
        };
        let moved = threshold > 0.0 && divergence >= threshold && g_p < rules.alpha;
        let breach = candidate.is_some() || moved;
        let calm = match self.firing {
            Some(Cause::New(t)) => {
                self.recent.share(t) < min_share / 2.0 || self.baseline.share(t) >= min_share / 4.0
            }
            Some(Cause::Divergence) => divergence < threshold * rules.resolve_ratio,
            None => !breach,
        };
        let step = self.hysteresis.step(breach, calm, rules)?;
        let cause = match (&step, self.firing) {
            (Step::Fire, _) => match candidate {
                Some((t, _)) => Cause::New(t),
                None => Cause::Divergence,
            },
            (Step::Resolve(_), Some(cause)) => cause,
            (Step::Resolve(_), None) => Cause::Divergence,
        };
        self.firing = matches!(&step, Step::Fire).then_some(cause);
        let finding = match cause {
            Cause::New(t) => {
                let (recent, baseline) = (self.recent.share(t), self.baseline.share(t));
                MixFinding {
                    item: self.name(t),
                    divergence: None,
                    comparison: Comparison {
                        baseline_mean: baseline,
                        recent_mean: recent,
                        effect: recent - baseline,
                        p_value: rise_p(
                            recent,
                            self.recent.rows.len(),
                            baseline,
                            self.baseline.rows.len(),
                        ),
                    },
                    recent_samples: self.recent.rows.len(),
                    baseline_samples: self.baseline.rows.len(),
                }
            }
            Cause::Divergence => {
                let (divergence, p_value) = if threshold > 0.0 {
                    (divergence, g_p)
                } else {
                    divergence_and_p(&self.recent, &self.baseline)
                };
                // The item whose share moved most (ties: the lower id, the older item).
                let moved_most = self
                    .recent
                    .counts
                    .keys()
                    .chain(self.baseline.counts.keys())
                    .map(|&t| (t, self.recent.share(t) - self.baseline.share(t)))
                    .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()).then(b.0.cmp(&a.0)));
                let (item, recent, baseline) = match moved_most {
                    Some((t, _)) => (self.name(t), self.recent.share(t), self.baseline.share(t)),
                    None => (String::new(), 0.0, 0.0),
                };
                MixFinding {
                    item,
                    divergence: Some(divergence),
                    comparison: Comparison {
                        baseline_mean: baseline,
                        recent_mean: recent,
                        effect: divergence,
                        p_value,
                    },
                    recent_samples: self.recent.rows.len(),
                    baseline_samples: self.baseline.rows.len(),
                }
            }
        };
        Some((step, finding))
    }
}

/// One-sided two-proportion z test of a share's rise.
fn rise_p(recent: f64, n: usize, baseline: f64, m: usize) -> f64 {
    let (n, m) = (n as f64, m as f64);
    let pooled = (recent * n + baseline * m) / (n + m);
    let se = (pooled * (1.0 - pooled) * (1.0 / n + 1.0 / m)).sqrt();
    if se > 0.0 {
        1.0 - normal_cdf((recent - baseline) / se)
    } else {
        0.0
    }
}

/// The Jensen–Shannon divergence (bits) between the two windows' item distributions, and the
/// p-value of the G-test of their homogeneity (1 when either window names nothing).
fn divergence_and_p(recent: &Window, baseline: &Window) -> (f64, f64) {
    let (r_total, b_total) = (recent.items as f64, baseline.items as f64);
    if r_total == 0.0 || b_total == 0.0 {
        return (0.0, 1.0);
    }
    let total = r_total + b_total;
    let mut js = 0.0;
    let mut g = 0.0;
    let mut items = 0usize;
    let mut visit = |r: f64, b: f64| {
        items += 1;
        let (p, q) = (r / r_total, b / b_total);
        let mid = (p + q) / 2.0;
        if p > 0.0 {
            js += 0.5 * p * (p / mid).log2();
            g += r * (r / ((r + b) * r_total / total)).ln();
        }
        if q > 0.0 {
            js += 0.5 * q * (q / mid).log2();
            g += b * (b / ((r + b) * b_total / total)).ln();
        }
    };
    for (item, &r) in &recent.counts {
        let b = baseline.counts.get(item).copied().unwrap_or(0);
        visit(f64::from(r), f64::from(b));
    }
    for (item, &b) in &baseline.counts {
        if !recent.counts.contains_key(item) {
            visit(0.0, f64::from(b));
        }
    }
    let df = items.saturating_sub(1);
    (js.clamp(0.0, 1.0), chi_square_upper(2.0 * g, df))
}

/// P(χ²_df ≥ x) through the Wilson–Hilferty cube-root approximation (1 for no degrees of
/// freedom).
fn chi_square_upper(x: f64, df: usize) -> f64 {
    if df == 0 || x <= 0.0 {
        return 1.0;
    }
    let k = df as f64;
    let spread = 2.0 / (9.0 * k);
    let z = ((x / k).cbrt() - (1.0 - spread)) / spread.sqrt();
    1.0 - normal_cdf(z)
}

/// The question type of a line-rate row (`details.question_type`), read from its rendered
/// details without parsing the rest.
pub(super) fn question_type(details: &crate::evaluation::Details) -> Option<String> {
    let text = details.json_text();
    const KEY: &str = "\"question_type\":\"";
    let at = text.find(KEY)? + KEY.len();
    let rest = text.get(at..)?;
    let end = rest.find('"')?;
    Some(rest[..end].to_string()).filter(|k| !k.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> RuleSet {
        RuleSet {
            recent_window: 100,
            baseline_window: 300,
            min_samples: 50,
            evaluate_every: 10,
            fire_after: 2,
            resolve_after: 2,
            new_question_type_min_share: 0.0,
            question_mix_divergence: 0.2,
            ..RuleSet::default()
        }
    }

    /// `n` rows cycling through `types`.
    fn feed(
        tracker: &mut MixTracker,
        types: &[&str],
        n: usize,
        rules: &RuleSet,
    ) -> Vec<MixFinding> {
        let mut fired = Vec::new();
        for i in 0..n {
            if let Some((Step::Fire, found)) = tracker.observe(types[i % types.len()], rules) {
                // What the engine's `finish_note` does on firing.
                tracker.hysteresis.firing = Some(super::super::detector::Firing {
                    started_at: chrono::Utc::now(),
                    alert_id: "test".into(),
                });
                fired.push(found);
            }
        }
        fired
    }

    #[test]
    fn a_mix_that_moves_as_a_whole_fires_on_its_divergence() {
        let rules = rules();
        let mut tracker = MixTracker::new(MixKind::QuestionTypes);
        let before = ["count:atom", "list:bond", "lookup:molecule", "count:bond"];
        assert!(feed(&mut tracker, &before, 600, &rules).is_empty());
        // The same types, in other proportions: no type is new, the mix moved.
        let after = ["count:atom", "count:atom", "count:atom", "list:bond"];
        let fired = feed(&mut tracker, &after, 200, &rules);
        assert_eq!(fired.len(), 1, "one firing");
        let found = &fired[0];
        assert!(
            found.divergence.is_some_and(|d| d >= 0.2),
            "{:?}",
            found.divergence
        );
        assert_eq!(found.item, "count:atom", "the type whose share moved most");
        assert!(found.comparison.p_value < rules.alpha);
    }

    #[test]
    fn a_steady_mix_stays_quiet_and_a_new_table_fires() {
        let mut rules = rules();
        rules.new_question_type_min_share = 0.10;
        let mut tracker = MixTracker::new(MixKind::QuestionTables);
        let before = ["count:atom", "list:atom+bond", "lookup:molecule", "count"];
        assert!(feed(&mut tracker, &before, 1000, &rules).is_empty());
        let after = [
            "count:atom",
            "list:atom+bond",
            "lookup:molecule",
            "count:connected",
        ];
        let fired = feed(&mut tracker, &after, 200, &rules);
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].item, "connected");
        assert!(fired[0].divergence.is_none());
    }

    #[test]
    fn the_chi_square_tail_is_close_to_tables() {
        // χ²(1) ≥ 3.841 is 0.05; χ²(10) ≥ 23.209 is 0.01.
        assert!((chi_square_upper(3.841, 1) - 0.05).abs() < 0.005);
        assert!((chi_square_upper(23.209, 10) - 0.01).abs() < 0.002);
        assert_eq!(chi_square_upper(5.0, 0), 1.0);
    }
}
