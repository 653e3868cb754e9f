//! Gold metrics: EX, ESM, ESM+, Hybrid-EX, FLEX, ROSE. (Skeleton.)
