//! Whether people would call a query correct, from line-rate evidence only: the features one
//! scored event shows ([`features`]) and the learned model that weighs them into `p_correct`
//! and the row's verdict ([`model`]). Φ is untouched: it stays STEF's formula; this is a
//! separate, calibrated probability (fitted offline on people's labels,
//! `sampling::verdict_fit`).

pub mod features;
pub mod model;

pub use features::{
    FEATURE_COUNT, FeatureError, FeatureInput, Features, QuestionShape, StoredFeatureInput,
    feature_index, feature_names,
};
pub use model::{
    Contribution, HeldOutFigures, LabelSource, MODEL_FORMAT, ModelError, ModelFile, VerdictModel,
};
