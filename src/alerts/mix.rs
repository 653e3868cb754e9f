//! The question-mix rule (`question_mix`): what users ask, watched per series through each
//! line-rate row's question type (`details.question_type`, read from the question alone). A
//! recent window of types is compared with the baseline window before it every
//! `evaluate_every` rows; it breaches when a type takes at least `new_question_type_min_share`
//! of the recent window while it took under a quarter of that share of the baseline — a new
//! kind of question, which is when an agent's quality moves first. The shared hysteresis fires
//! and resolves it; the notification names the type and points at
//! `sqlgrade breakdown --by question_type`.

use std::collections::{HashMap, VecDeque};

use super::config::RuleSet;
use super::detector::{Hysteresis, Step};
use super::stats::{Comparison, normal_cdf};

/// Question types kept apart per series at most (the rest share one slot).
pub const MAX_TYPES: usize = 10_000;

/// One series' windows of question types.
#[derive(Debug, Default)]
pub(super) struct MixTracker {
    ids: HashMap<String, u32>,
    names: Vec<String>,
    recent: VecDeque<u32>,
    baseline: VecDeque<u32>,
    since_evaluation: usize,
    pub(super) observations: u64,
    pub(super) hysteresis: Hysteresis,
    /// The type the firing alert is about.
    pub(super) firing_type: Option<u32>,
}

/// What one evaluation found: the type, its recent and baseline shares and window sizes.
pub(super) struct MixFinding {
    pub(super) question_type: String,
    pub(super) comparison: Comparison,
    pub(super) recent_samples: usize,
    pub(super) baseline_samples: usize,
}

impl MixTracker {
    fn id(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        if self.names.len() >= MAX_TYPES {
            return u32::MAX;
        }
        let id = self.names.len() as u32;
        self.ids.insert(key.to_string(), id);
        self.names.push(key.to_string());
        id
    }

    /// Add one row's question type; every `evaluate_every` rows with both windows at
    /// `min_samples`, the state change it causes (if any) with what it is about.
    pub(super) fn observe(&mut self, key: &str, rules: &RuleSet) -> Option<(Step, MixFinding)> {
        let id = self.id(key);
        self.observations += 1;
        self.recent.push_back(id);
        if self.recent.len() > rules.recent_window
            && let Some(old) = self.recent.pop_front()
        {
            self.baseline.push_back(old);
            if self.baseline.len() > rules.baseline_window {
                self.baseline.pop_front();
            }
        }
        self.since_evaluation += 1;
        if self.since_evaluation < rules.evaluate_every
            || self.recent.len() < rules.min_samples
            || self.baseline.len() < rules.min_samples
        {
            return None;
        }
        self.since_evaluation = 0;
        let count = |window: &VecDeque<u32>| {
            let mut counts: HashMap<u32, usize> = HashMap::new();
            for &t in window {
                *counts.entry(t).or_default() += 1;
            }
            counts
        };
        let (now, before) = (count(&self.recent), count(&self.baseline));
        let (n, m) = (self.recent.len() as f64, self.baseline.len() as f64);
        let min_share = rules.new_question_type_min_share;
        let share_before = |t: u32| before.get(&t).copied().unwrap_or(0) as f64 / m;
        // The newest-looking type: the largest recent share among those the baseline lacked.
        let candidate = now
            .iter()
            .filter(|&(&t, _)| t != u32::MAX)
            .map(|(&t, &c)| (t, c as f64 / n))
            .filter(|&(t, share)| share >= min_share && share_before(t) < min_share / 4.0)
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        let watched = candidate
            .map(|(t, _)| t)
            .or(self.firing_type)
            .unwrap_or(u32::MAX);
        let recent_share = now.get(&watched).copied().unwrap_or(0) as f64 / n;
        let baseline_share = share_before(watched);
        let calm = recent_share < min_share / 2.0 || baseline_share >= min_share / 4.0;
        let step = self.hysteresis.step(candidate.is_some(), calm, rules)?;
        if matches!(step, Step::Fire) {
            self.firing_type = Some(watched);
        } else {
            self.firing_type = None;
        }
        // One-sided two-proportion z test of the rise.
        let pooled = (recent_share * n + baseline_share * m) / (n + m);
        let se = (pooled * (1.0 - pooled) * (1.0 / n + 1.0 / m)).sqrt();
        let p_value = if se > 0.0 {
            1.0 - normal_cdf((recent_share - baseline_share) / se)
        } else {
            0.0
        };
        let question_type = self
            .names
            .get(watched as usize)
            .cloned()
            .unwrap_or_else(|| "(other types)".into());
        Some((
            step,
            MixFinding {
                question_type,
                comparison: Comparison {
                    baseline_mean: baseline_share,
                    recent_mean: recent_share,
                    effect: recent_share - baseline_share,
                    p_value,
                },
                recent_samples: self.recent.len(),
                baseline_samples: self.baseline.len(),
            },
        ))
    }
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
