//! The built-in judge: lexicon and pattern rules, no LLM. (Skeleton.)

use async_trait::async_trait;

use super::{Judge, JudgeAssessment, JudgeError, JudgeRequest};

/// Judge that derives the verdict from the deterministic alignment record by documented rules.
/// Its confidence never reaches 0.85: it cannot read intent.
#[derive(Debug, Clone, Default)]
pub struct DeterministicJudge;

#[async_trait]
impl Judge for DeterministicJudge {
    fn kind(&self) -> String {
        "deterministic".into()
    }

    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError> {
        let _ = request;
        todo!("deterministic judge")
    }
}
