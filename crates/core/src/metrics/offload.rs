//! Running CPU-heavy metric work off the async workers, without the core knowing the runtime.
//!
//! The daemon implements [`Offload`] with tokio's blocking pool; [`Inline`] runs the work on the
//! calling thread (tests, benches, callers without a runtime).

use futures::future::BoxFuture;

/// Why offloaded work produced no result.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// The pool could not run the job to its end (it panicked or was cancelled): the pool's own
    /// account.
    #[error(transparent)]
    Pool(Box<dyn std::error::Error + Send + Sync>),
    /// The job ran but its result never came back.
    #[error("offloaded job ended without a result")]
    NoResult,
}

/// Runs CPU-heavy work off the async workers. The daemon hands it to tokio's blocking pool;
/// [`Inline`] runs it on the calling thread (tests, benches, callers without a runtime).
pub trait Offload: Send + Sync {
    /// Run `job`; the future resolves when it has run, or with why it could not.
    fn offload(
        &self,
        job: Box<dyn FnOnce() + Send + 'static>,
    ) -> BoxFuture<'static, Result<(), OffloadError>>;
}

/// Runs offloaded work on the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Inline;

impl Offload for Inline {
    fn offload(
        &self,
        job: Box<dyn FnOnce() + Send + 'static>,
    ) -> BoxFuture<'static, Result<(), OffloadError>> {
        job();
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Run `f` through `offload` and return its result.
pub async fn offloaded<R: Send + 'static>(
    offload: &dyn Offload,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, OffloadError> {
    let (tx, rx) = futures::channel::oneshot::channel();
    offload
        .offload(Box::new(move || {
            let _ = tx.send(f());
        }))
        .await?;
    rx.await.map_err(|_| OffloadError::NoResult)
}
