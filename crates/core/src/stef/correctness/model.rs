//! The correctness model: a logistic regression over named line-rate features that gives every
//! `stef` row `p_correct`, the probability that people would call the query correct, and the
//! row's boolean `verdict` (`p_correct ≥ threshold`).
//!
//! A model is a JSON file ([`ModelFile`]): its weights by feature name, the intercept, the
//! threshold chosen when it was fitted (for a target share of correct queries flagged), the
//! label sources it was fitted on (name, SHA-256, size, items) and its cross-validated figures.
//! Its **version** (`pc-` and 12 hex digits) is a hash of what decides its output — weights,
//! intercept, threshold — so two files that score alike share it and any refit that changes a
//! number gets a new one; the version is part of the line-rate judge identity. The build ships
//! one, fitted on the two label files of `shared/data/labels` ([`VerdictModel::shipped`]);
//! `[stef] model` names another (`calibrate --fit` writes one from a deployment's labels).
//!
//! Applying it is a dot product and a logistic function over [`FEATURE_COUNT`] numbers, well
//! under a microsecond; fitting is offline (`sampling::verdict_fit`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::features::{FEATURE_COUNT, Features, feature_index, feature_names};

/// The model the build ships (fitted on `shared/data/labels`; `examples/verdict_model.rs`
/// refits it and a test holds the file to that fit).
pub const SHIPPED_MODEL_JSON: &str = include_str!("../../../models/p_correct.json");

/// The format version this build reads and writes.
pub const MODEL_FORMAT: u32 = 1;

/// A label source a model was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSource {
    /// What it is (a file name, `store` for a deployment's own labels).
    pub name: String,
    /// SHA-256 of its bytes, hex (empty for a store).
    #[serde(default)]
    pub sha256: String,
    /// Its size in bytes (0 for a store).
    #[serde(default)]
    pub bytes: u64,
    /// Labelled items taken from it.
    pub items: u64,
    /// Of which people called correct.
    pub correct: u64,
}

/// Figures of a model on held-out items (cross-validated, or on another source).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HeldOutFigures {
    /// Items.
    pub n: u64,
    /// Of which people called correct.
    pub correct: u64,
    /// κ at the best cut-off that flags at most the target share of correct items (a ranking
    /// measure: the cut is chosen on these items).
    pub kappa_at_target: Option<f64>,
    /// The share of correct items the model's own threshold flags.
    pub flag_rate: Option<f64>,
    /// κ of the model's own verdict (`p ≥ threshold`).
    pub kappa: Option<f64>,
    /// Expected calibration error over 10 equal-width bins of `p`.
    pub calibration_error: Option<f64>,
    /// Brier score (mean squared error of `p`).
    pub brier: Option<f64>,
    /// Mean `p` (what the model says the share correct is).
    pub mean_p: Option<f64>,
}

/// A model file as stored (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    /// [`MODEL_FORMAT`].
    pub format: u32,
    /// What it is, for people (`fitted on …`).
    #[serde(default)]
    pub description: String,
    /// When it was fitted (RFC 3339 date).
    #[serde(default)]
    pub fitted: String,
    /// The sqlgrade version that fitted it.
    #[serde(default)]
    pub sqlgrade: String,
    /// The share of correct queries the threshold was chosen to flag at most.
    pub target_flag_rate: f64,
    /// `p_correct` at or above which the row's verdict is correct.
    pub threshold: f64,
    /// The L2 penalty it was fitted with.
    #[serde(default)]
    pub l2: f64,
    /// The intercept (log-odds with every feature 0).
    pub intercept: f64,
    /// Weights by feature name (log-odds per unit); features not listed weigh 0.
    pub weights: BTreeMap<String, f64>,
    /// The label sources it was fitted on.
    #[serde(default)]
    pub sources: Vec<LabelSource>,
    /// Held-out figures by name (`cross_validated`, `leave_one_database_out`, …).
    #[serde(default)]
    pub held_out: BTreeMap<String, HeldOutFigures>,
}

/// Why a model cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// Not a model file.
    #[error("not a correctness model file: {0}")]
    Malformed(#[source] crate::event::JsonError),
    /// Another format version.
    #[error("model format {found}, this build reads format {MODEL_FORMAT}")]
    Format {
        /// The file's format.
        found: u32,
    },
    /// A weight for a feature the build does not compute.
    #[error("the model weighs feature {0:?}, which this build does not know")]
    UnknownFeature(String),
    /// A number that is not finite or out of range.
    #[error("{0}")]
    Invalid(String),
}

/// A loaded model, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictModel {
    file: ModelFile,
    weights: Features,
    version: String,
}

/// One feature's part of a row's log-odds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contribution {
    /// The feature's name.
    pub feature: &'static str,
    /// Its value on the row.
    pub value: f64,
    /// weight × value (log-odds).
    pub log_odds: f64,
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

impl VerdictModel {
    /// The model the build ships.
    pub fn shipped() -> &'static VerdictModel {
        static SHIPPED: std::sync::OnceLock<VerdictModel> = std::sync::OnceLock::new();
        SHIPPED.get_or_init(|| {
            // A test parses the shipped file; should it ever not parse, every row would say so
            // in its verdict rather than crash: an all-zero model scores 0.5 and flags nothing.
            VerdictModel::parse(SHIPPED_MODEL_JSON).unwrap_or_else(|_| VerdictModel::neutral())
        })
    }

    /// A model that knows nothing: every row 0.5, nothing flagged (what is left when the shipped
    /// file cannot be read; a test makes sure it can).
    fn neutral() -> VerdictModel {
        VerdictModel::from_file(ModelFile {
            format: MODEL_FORMAT,
            description: "neutral".into(),
            fitted: String::new(),
            sqlgrade: String::new(),
            target_flag_rate: 0.0,
            threshold: 0.0,
            l2: 0.0,
            intercept: 0.0,
            weights: BTreeMap::new(),
            sources: Vec::new(),
            held_out: BTreeMap::new(),
        })
        .expect("an empty model is valid")
    }

    /// Parse and check a model file's text.
    pub fn parse(text: &str) -> Result<VerdictModel, ModelError> {
        let file: ModelFile =
            serde_json::from_str(text).map_err(|e| ModelError::Malformed(e.into()))?;
        VerdictModel::from_file(file)
    }

    /// Check a model file and make it ready to apply.
    pub fn from_file(file: ModelFile) -> Result<VerdictModel, ModelError> {
        if file.format != MODEL_FORMAT {
            return Err(ModelError::Format { found: file.format });
        }
        if !file.intercept.is_finite() {
            return Err(ModelError::Invalid(
                "intercept is not a finite number".into(),
            ));
        }
        if !(file.threshold.is_finite() && (0.0..=1.0).contains(&file.threshold)) {
            return Err(ModelError::Invalid(format!(
                "threshold must be between 0 and 1, not {}",
                file.threshold
            )));
        }
        if !(file.target_flag_rate.is_finite() && (0.0..=1.0).contains(&file.target_flag_rate)) {
            return Err(ModelError::Invalid(format!(
                "target_flag_rate must be between 0 and 1, not {}",
                file.target_flag_rate
            )));
        }
        let mut weights = [0.0; FEATURE_COUNT];
        for (name, weight) in &file.weights {
            let i = feature_index(name).ok_or_else(|| ModelError::UnknownFeature(name.clone()))?;
            if !weight.is_finite() {
                return Err(ModelError::Invalid(format!(
                    "the weight of {name:?} is not a finite number"
                )));
            }
            weights[i] = *weight;
        }
        let version = version_of(file.intercept, file.threshold, &weights);
        Ok(VerdictModel {
            file,
            weights,
            version,
        })
    }

    /// The version: `pc-` and 12 hex digits of a hash of the weights, intercept and threshold.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The file it was read from.
    pub fn file(&self) -> &ModelFile {
        &self.file
    }

    /// The weights, in [`feature_names`](super::feature_names)' order (0 where the file
    /// names none).
    pub fn weights(&self) -> &Features {
        &self.weights
    }

    /// `p_correct ≥` this is a correct verdict.
    pub fn threshold(&self) -> f64 {
        self.file.threshold
    }

    /// The log-odds of a feature vector.
    pub fn log_odds(&self, features: &Features) -> f64 {
        self.file.intercept
            + self
                .weights
                .iter()
                .zip(features)
                .map(|(w, x)| w * x)
                .sum::<f64>()
    }

    /// `p_correct` of a feature vector.
    pub fn p_correct(&self, features: &Features) -> f64 {
        sigmoid(self.log_odds(features))
    }

    /// The verdict for a `p_correct`.
    pub fn verdict(&self, p_correct: f64) -> bool {
        p_correct >= self.file.threshold
    }

    /// The `limit` features that move a row's log-odds most, largest first (what the event
    /// page shows: "`value_not_in_column` −2.9, `fully_applied` +0.8").
    pub fn contributions(&self, features: &Features, limit: usize) -> Vec<Contribution> {
        let names = feature_names();
        let mut parts: Vec<Contribution> = features
            .iter()
            .zip(&self.weights)
            .enumerate()
            .filter(|(_, (x, w))| **x != 0.0 && **w != 0.0)
            .map(|(i, (x, w))| Contribution {
                feature: names[i].as_str(),
                value: *x,
                log_odds: w * x,
            })
            .collect();
        parts.sort_by(|a, b| b.log_odds.abs().total_cmp(&a.log_odds.abs()));
        parts.truncate(limit);
        parts
    }
}

fn version_of(intercept: f64, threshold: f64, weights: &Features) -> String {
    let mut hasher = Sha256::new();
    hasher.update(intercept.to_bits().to_le_bytes());
    hasher.update(threshold.to_bits().to_le_bytes());
    for (name, w) in feature_names().iter().zip(weights) {
        if *w != 0.0 {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(w.to_bits().to_le_bytes());
        }
    }
    format!("pc-{}", &hex::encode(hasher.finalize())[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_model_parses_and_names_known_features() {
        let model = VerdictModel::parse(SHIPPED_MODEL_JSON).expect("the shipped model parses");
        assert_eq!(model.version(), VerdictModel::shipped().version());
        assert!(model.version().starts_with("pc-"));
        assert!(
            !model.file().sources.is_empty(),
            "it says what it was fitted on"
        );
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let ok = r#"{"format":1,"target_flag_rate":0.1,"threshold":0.4,"intercept":0.5,"weights":{"sql.tables":-0.3}}"#;
        let model = VerdictModel::parse(ok).expect("a minimal model");
        let mut x = [0.0; FEATURE_COUNT];
        assert!((model.p_correct(&x) - sigmoid(0.5)).abs() < 1e-12);
        x[feature_index("sql.tables").unwrap()] = 2.0;
        assert!((model.log_odds(&x) - (0.5 - 0.6)).abs() < 1e-12);
        let parts = model.contributions(&x, 3);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].feature, "sql.tables");

        let unknown = ok.replace("sql.tables", "sql.nonsense");
        assert_eq!(
            VerdictModel::parse(&unknown),
            Err(ModelError::UnknownFeature("sql.nonsense".into()))
        );
        let format = ok.replace("\"format\":1", "\"format\":2");
        assert_eq!(
            VerdictModel::parse(&format),
            Err(ModelError::Format { found: 2 })
        );
        let threshold = ok.replace("0.4", "1.4");
        assert!(matches!(
            VerdictModel::parse(&threshold),
            Err(ModelError::Invalid(_))
        ));
        assert!(matches!(
            VerdictModel::parse("{\"format\": 1"),
            Err(ModelError::Malformed(_))
        ));
        // Another model with the same numbers is the same version; another weight is another.
        let same = ok.replace("\"intercept\"", "\"description\":\"x\",\"intercept\"");
        assert_eq!(
            VerdictModel::parse(&same).unwrap().version(),
            model.version()
        );
        let other = ok.replace("-0.3", "-0.31");
        assert_ne!(
            VerdictModel::parse(&other).unwrap().version(),
            model.version()
        );
    }
}
