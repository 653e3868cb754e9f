//! Pipeline topology: sources → scorer → sinks. (Skeleton.)
