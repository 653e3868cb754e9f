//! Sinks for evaluation rows and dead letters. (Skeleton.)
