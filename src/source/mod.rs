//! Sources of events. (Skeleton.)
