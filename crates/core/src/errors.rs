//! What an error says, with its sources: one line for a log, a dead letter or a notification,
//! where a terse top-level message (reqwest's, a server's text-only error) would hide the cause.
//! Pure; every edge that reports an error with its chain uses this one function.

/// An error and its sources, `: `-separated, each part once (a source whose text the message
/// already holds is not repeated).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot write the batch")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Inner;

    #[derive(Debug, thiserror::Error)]
    #[error("request failed: connection refused")]
    struct Repeats(#[source] Inner);

    #[test]
    fn an_error_says_its_sources_once() {
        assert_eq!(
            error_chain(&Outer(Inner)),
            "cannot write the batch: connection refused"
        );
        assert_eq!(
            error_chain(&Repeats(Inner)),
            "request failed: connection refused"
        );
    }
}
