//! How well each judge agrees with people, kept incrementally per judge identity: Cohen's κ and
//! accuracy against human labels, with 95% intervals and the number of labelled events.
//!
//! A **pair** is one human label (one reviewer's `correct`/`incorrect` on one event; `unsure`
//! never enters) beside one judge row of the same event: the line-rate `stef` row or the
//! LLM-judged `stef_judged` row, each under its own [`judge identity`](crate::evaluation::StefColumns::judge_identity).
//! The judge's side counts as correct when its verdict is `correct` or `likely_correct`.
//!
//! [`AgreementTracker`] holds, per [`AgreementKey`] (metric, identity, series), the confusion
//! counts of every pair so far and of the most recent `window` pairs. Adding a pair is O(1)
//! amortised; a reviewer who changes a label replaces its pair (the old one is taken out of both
//! counts), so nothing is ever rescanned. Memory: one small entry per label — labels are made by
//! people, thousands, not millions.
//!
//! Intervals: accuracy has the Wilson score interval; κ has the large-sample normal interval
//! `κ ± 1.96 · sqrt(po (1 − po) / (n (1 − pe)²))` (Cohen 1960), clipped to [−1, 1] — the
//! interval the ClickHouse view `judge_agreement_daily` computes too, so the review page,
//! `report`, the alerts and Grafana give one number. (`calibrate` also gives a bootstrap
//! interval; on a few dozen pairs the two differ by a few hundredths.)

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use super::estimate::{Z_95, wilson_interval};

/// A 2×2 confusion matrix (label = truth, prediction = the judge or metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Confusion {
    /// Judge positive, label positive.
    pub tp: u64,
    /// Judge positive, label negative.
    pub fp: u64,
    /// Judge negative, label positive.
    pub fn_: u64,
    /// Judge negative, label negative.
    pub tn: u64,
}

impl Confusion {
    /// Add one (prediction, label) pair.
    pub fn add(&mut self, predicted: bool, label: bool) {
        *self.cell(predicted, label) += 1;
    }

    /// Take one (prediction, label) pair out (a replaced label, a pair leaving a window).
    pub fn remove(&mut self, predicted: bool, label: bool) {
        let cell = self.cell(predicted, label);
        *cell = cell.saturating_sub(1);
    }

    fn cell(&mut self, predicted: bool, label: bool) -> &mut u64 {
        match (predicted, label) {
            (true, true) => &mut self.tp,
            (true, false) => &mut self.fp,
            (false, true) => &mut self.fn_,
            (false, false) => &mut self.tn,
        }
    }

    /// Number of pairs.
    pub fn n(&self) -> u64 {
        self.tp + self.fp + self.fn_ + self.tn
    }

    /// Observed and chance agreement (po, pe); `None` without pairs.
    fn agreement_parts(&self) -> Option<(f64, f64)> {
        let n = self.n() as f64;
        if n == 0.0 {
            return None;
        }
        let po = (self.tp + self.tn) as f64 / n;
        let pred_pos = (self.tp + self.fp) as f64;
        let label_pos = (self.tp + self.fn_) as f64;
        let pe = (pred_pos * label_pos + (n - pred_pos) * (n - label_pos)) / (n * n);
        Some((po, pe))
    }

    /// Cohen's κ; None when undefined (no pairs, or chance agreement is 1).
    pub fn kappa(&self) -> Option<f64> {
        let (po, pe) = self.agreement_parts()?;
        (pe < 1.0).then(|| (po - pe) / (1.0 - pe))
    }

    /// The large-sample 95% interval of κ (module docs), clipped to [−1, 1].
    pub fn kappa_interval(&self) -> Option<(f64, f64)> {
        let (po, pe) = self.agreement_parts()?;
        let kappa = self.kappa()?;
        let n = self.n() as f64;
        let se = (po * (1.0 - po) / (n * (1.0 - pe) * (1.0 - pe))).sqrt();
        Some(((kappa - Z_95 * se).max(-1.0), (kappa + Z_95 * se).min(1.0)))
    }

    /// Accuracy; None without pairs.
    pub fn accuracy(&self) -> Option<f64> {
        let n = self.n();
        (n > 0).then(|| (self.tp + self.tn) as f64 / n as f64)
    }

    /// The Wilson 95% interval of the accuracy.
    pub fn accuracy_interval(&self) -> Option<(f64, f64)> {
        wilson_interval(self.tp + self.tn, self.n())
    }

    /// Precision of the judge's positives; None when it has none.
    pub fn precision(&self) -> Option<f64> {
        let d = self.tp + self.fp;
        (d > 0).then(|| self.tp as f64 / d as f64)
    }

    /// Recall of the labelled positives; None when there are none.
    pub fn recall(&self) -> Option<f64> {
        let d = self.tp + self.fn_;
        (d > 0).then(|| self.tp as f64 / d as f64)
    }

    /// κ, accuracy and their intervals.
    pub fn summary(&self) -> AgreementSummary {
        AgreementSummary {
            labelled: self.n(),
            kappa: self.kappa(),
            kappa_interval: self.kappa_interval(),
            accuracy: self.accuracy(),
            accuracy_interval: self.accuracy_interval(),
            confusion: *self,
        }
    }
}

/// Agreement over a set of pairs, with 95% intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AgreementSummary {
    /// Pairs (labels beside a judge verdict).
    pub labelled: u64,
    /// Cohen's κ (`None`: no pairs, or every pair on one side).
    pub kappa: Option<f64>,
    /// Its 95% interval.
    pub kappa_interval: Option<(f64, f64)>,
    /// Accuracy.
    pub accuracy: Option<f64>,
    /// Its 95% Wilson interval.
    pub accuracy_interval: Option<(f64, f64)>,
    /// The counts.
    pub confusion: Confusion,
}

impl AgreementSummary {
    /// `κ 0.62 [0.41, 0.83], accuracy 0.84 [0.72, 0.91], 52 labelled` (or what is undefined).
    pub fn describe(&self) -> String {
        let interval = |i: Option<(f64, f64)>| {
            i.map_or_else(String::new, |(lo, hi)| format!(" [{lo:.2}, {hi:.2}]"))
        };
        let kappa = self.kappa.map_or_else(
            || "κ undefined".to_string(),
            |k| format!("κ {k:.2}{}", interval(self.kappa_interval)),
        );
        let accuracy = self.accuracy.map_or_else(
            || "accuracy undefined".to_string(),
            |a| format!("accuracy {a:.2}{}", interval(self.accuracy_interval)),
        );
        format!("{kappa}, {accuracy}, {} labelled", self.labelled)
    }
}

/// Which agreement a pair counts toward: the judge metric (`stef` line rate, `stef_judged` LLM),
/// the judge's identity, and the series (the alert `series_key` labels as text).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct AgreementKey {
    /// `stef` or `stef_judged`.
    pub metric: crate::evaluation::StoredMetric,
    /// The judge identity of the row.
    pub identity: String,
    /// The series (`app_id=a agent_id=b …`; '' for all traffic).
    pub series: String,
}

/// One label beside one judge row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgreementPair {
    /// The labelled event.
    pub event_id: String,
    /// Who labelled it.
    pub reviewer: String,
    /// Whose verdict it is compared with.
    pub key: AgreementKey,
    /// The judge said correct (`correct`/`likely_correct`).
    pub judge: bool,
    /// The reviewer said correct.
    pub human: bool,
}

/// The counts of one [`AgreementKey`]: every pair, and the most recent `window` of them.
#[derive(Debug, Clone, Default)]
struct KeyCounts {
    all: Confusion,
    recent: Confusion,
    /// (event, reviewer, judge, human) of the recent pairs, oldest first.
    window: VecDeque<(String, String, bool, bool)>,
}

/// Agreement per [`AgreementKey`], kept incrementally (module docs).
#[derive(Debug, Clone, Default)]
pub struct AgreementTracker {
    window: usize,
    keys: BTreeMap<AgreementKey, KeyCounts>,
    /// The current pair of each (event, reviewer, metric): what a changed label replaces.
    pairs: HashMap<(String, String, crate::evaluation::StoredMetric), (AgreementKey, bool, bool)>,
}

/// What adding a pair did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairChange {
    /// A new pair.
    Added,
    /// An earlier pair of the same (event, reviewer, metric) was replaced.
    Replaced,
    /// The same pair was already counted (a re-read label).
    Unchanged,
}

impl AgreementTracker {
    /// A tracker whose recent counts hold the last `window` pairs of each key (at least 1).
    pub fn new(window: usize) -> AgreementTracker {
        AgreementTracker {
            window: window.max(1),
            ..AgreementTracker::default()
        }
    }

    /// Count one pair (replacing the earlier pair of its event, reviewer and metric).
    pub fn add(&mut self, pair: AgreementPair) -> PairChange {
        let slot = (
            pair.event_id.clone(),
            pair.reviewer.clone(),
            pair.key.metric.clone(),
        );
        let mut change = PairChange::Added;
        if let Some((key, judge, human)) = self.pairs.get(&slot) {
            if *key == pair.key && *judge == pair.judge && *human == pair.human {
                return PairChange::Unchanged;
            }
            let (key, judge, human) = (key.clone(), *judge, *human);
            if let Some(counts) = self.keys.get_mut(&key) {
                counts.all.remove(judge, human);
                if let Some(at) = counts
                    .window
                    .iter()
                    .position(|(e, r, _, _)| *e == pair.event_id && *r == pair.reviewer)
                {
                    counts.window.remove(at);
                    counts.recent.remove(judge, human);
                }
            }
            change = PairChange::Replaced;
        }
        let counts = self.keys.entry(pair.key.clone()).or_default();
        counts.all.add(pair.judge, pair.human);
        counts.recent.add(pair.judge, pair.human);
        counts.window.push_back((
            pair.event_id.clone(),
            pair.reviewer.clone(),
            pair.judge,
            pair.human,
        ));
        if counts.window.len() > self.window
            && let Some((_, _, judge, human)) = counts.window.pop_front()
        {
            counts.recent.remove(judge, human);
        }
        self.pairs.insert(slot, (pair.key, pair.judge, pair.human));
        change
    }

    /// Agreement over every pair of `key`.
    pub fn all(&self, key: &AgreementKey) -> Option<AgreementSummary> {
        self.keys.get(key).map(|c| c.all.summary())
    }

    /// Agreement over the most recent `window` pairs of `key`.
    pub fn recent(&self, key: &AgreementKey) -> Option<AgreementSummary> {
        self.keys.get(key).map(|c| c.recent.summary())
    }

    /// Every key with its agreement over all pairs and over the recent window.
    pub fn snapshot(&self) -> Vec<AgreementRow> {
        self.keys
            .iter()
            .map(|(key, counts)| AgreementRow {
                key: key.clone(),
                all: counts.all.summary(),
                recent: counts.recent.summary(),
            })
            .collect()
    }

    /// Labels counted (pairs over every key).
    pub fn pairs(&self) -> usize {
        self.pairs.len()
    }
}

/// One key of [`AgreementTracker::snapshot`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreementRow {
    /// Metric, identity, series.
    pub key: AgreementKey,
    /// Over every pair.
    pub all: AgreementSummary,
    /// Over the recent window.
    pub recent: AgreementSummary,
}

/// Seconds in a week.
const WEEK: i64 = 7 * 24 * 3600;
/// 1970-01-05, the first Monday after the epoch.
const FIRST_MONDAY: i64 = 4 * 24 * 3600;

/// The UTC week (Monday to Sunday) of a time in seconds since the epoch, as a number.
pub fn utc_week(epoch: i64) -> i64 {
    (epoch - FIRST_MONDAY).div_euclid(WEEK)
}

/// The first second (Monday 00:00 UTC) of week `week` of [`utc_week`].
pub fn week_start(week: i64) -> i64 {
    week * WEEK + FIRST_MONDAY
}

/// The calibration sample of a judge identity: among `events` (event id, identity, event
/// time in seconds), per identity and UTC week (Monday to Sunday), the `per_week` events with the smallest hash
/// draw ([`super::select::uniform_draw`] with `salt`). A bottom-k sample by a hash is a uniform
/// sample without replacement whatever the traffic's volume, the same for every reader, and
/// stable as the week fills (an event in it stays in it unless `per_week` smaller draws arrive).
/// Returns the sampled event ids.
pub fn calibration_sample<'a, 'b>(
    events: impl IntoIterator<Item = (&'a str, &'b str, i64)>,
    salt: &str,
    per_week: usize,
) -> std::collections::HashSet<&'a str> {
    let mut by_week: HashMap<(&'b str, i64), Vec<(f64, &'a str)>> = HashMap::new();
    for (event_id, identity, epoch) in events {
        by_week
            .entry((identity, utc_week(epoch)))
            .or_default()
            .push((super::select::uniform_draw(salt, event_id), event_id));
    }
    let mut out = std::collections::HashSet::new();
    for (_, mut draws) in by_week {
        draws.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
        draws.dedup_by(|a, b| a.1 == b.1);
        out.extend(draws.into_iter().take(per_week).map(|(_, id)| id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(identity: &str) -> AgreementKey {
        AgreementKey {
            metric: "stef_judged".into(),
            identity: identity.into(),
            series: String::new(),
        }
    }

    fn pair(
        event: usize,
        reviewer: &str,
        identity: &str,
        judge: bool,
        human: bool,
    ) -> AgreementPair {
        AgreementPair {
            event_id: format!("e{event}"),
            reviewer: reviewer.into(),
            key: key(identity),
            judge,
            human,
        }
    }

    #[test]
    fn kappa_and_intervals_match_hand_computation() {
        // tp 20, fp 5, fn 10, tn 15: po = 0.7, pe = (25·30 + 25·20)/2500 = 0.5, κ = 0.4,
        // se = sqrt(0.7·0.3 / (50 · 0.25)) = 0.1296 → [0.146, 0.654].
        let c = Confusion {
            tp: 20,
            fp: 5,
            fn_: 10,
            tn: 15,
        };
        assert!((c.kappa().unwrap() - 0.4).abs() < 1e-12);
        let (lo, hi) = c.kappa_interval().unwrap();
        assert!(
            (lo - 0.146).abs() < 1e-3 && (hi - 0.654).abs() < 1e-3,
            "{lo} {hi}"
        );
        let (lo, hi) = c.accuracy_interval().unwrap();
        assert!(lo < 0.7 && hi > 0.7 && lo > 0.55 && hi < 0.82, "{lo} {hi}");
        assert_eq!(Confusion::default().kappa(), None);
        let one_sided = Confusion {
            tp: 10,
            ..Confusion::default()
        };
        assert_eq!(one_sided.kappa(), None, "chance agreement 1: undefined");
        assert_eq!(one_sided.accuracy(), Some(1.0));
    }

    #[test]
    fn a_changed_label_replaces_its_pair_and_the_window_slides() {
        let mut t = AgreementTracker::new(4);
        for i in 0..6 {
            assert_eq!(
                t.add(pair(i, "ann", "llm a", true, true)),
                PairChange::Added
            );
        }
        let k = key("llm a");
        assert_eq!(t.all(&k).unwrap().labelled, 6);
        assert_eq!(t.recent(&k).unwrap().labelled, 4);
        // Ann changes her mind on e5 (in the window) and on e0 (out of it).
        assert_eq!(
            t.add(pair(5, "ann", "llm a", true, false)),
            PairChange::Replaced
        );
        assert_eq!(
            t.add(pair(0, "ann", "llm a", true, false)),
            PairChange::Replaced
        );
        assert_eq!(
            t.add(pair(0, "ann", "llm a", true, false)),
            PairChange::Unchanged
        );
        let all = t.all(&k).unwrap().confusion;
        assert_eq!((all.tp, all.fp), (4, 2));
        let recent = t.recent(&k).unwrap().confusion;
        assert_eq!(recent.n(), 4, "{recent:?}");
        assert_eq!(
            recent.fp, 2,
            "e5 and e0 re-entered as the newest pairs: {recent:?}"
        );
        // Another reviewer on the same event is another pair.
        t.add(pair(5, "bob", "llm a", true, true));
        assert_eq!(t.all(&k).unwrap().labelled, 7);
        assert_eq!(t.pairs(), 7);
    }

    #[test]
    fn identities_are_tracked_apart() {
        let mut t = AgreementTracker::new(100);
        for i in 0..40 {
            let truth = i % 2 == 0;
            t.add(pair(i, "ann", "llm good", truth, truth));
            t.add(pair(i + 100, "ann", "llm bad", !truth, truth));
        }
        let good = t.all(&key("llm good")).unwrap();
        let bad = t.all(&key("llm bad")).unwrap();
        assert_eq!(good.kappa, Some(1.0));
        assert_eq!(bad.kappa, Some(-1.0));
        assert_eq!(t.snapshot().len(), 2);
        assert!(
            bad.describe().starts_with("κ -1.00 [-1.00, -1.00]"),
            "{}",
            bad.describe()
        );
    }

    #[test]
    fn the_calibration_sample_takes_the_same_number_per_identity_and_week() {
        let ids: Vec<String> = (0..1000).map(|i| format!("event-{i}")).collect();
        let events: Vec<(&str, &str, i64)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let identity = if i % 10 == 0 {
                    "llm rare"
                } else {
                    "deterministic"
                };
                (id.as_str(), identity, (i as i64) * 1_000)
            })
            .collect();
        // 0 … 999,000 s: 1970-01-01 (Thursday) to 1970-01-12, three Monday-to-Sunday weeks.
        assert_eq!(utc_week(0), -1);
        assert_eq!(utc_week(FIRST_MONDAY), 0);
        assert_eq!(week_start(utc_week(999_000)), FIRST_MONDAY + WEEK);
        let sample = calibration_sample(events.iter().copied(), "salt", 5);
        // 5 per identity and week, except the rare identity's last week, which holds only 4
        // events (960, 970, 980, 990 thousand seconds).
        assert_eq!(sample.len(), 29);
        let again = calibration_sample(events.iter().copied(), "salt", 5);
        assert_eq!(sample, again, "deterministic");
        let other = calibration_sample(events.iter().copied(), "another salt", 5);
        assert_ne!(sample, other);
    }
}
