//! The review page: `sqlgrade serve`, or `[server] review = true` inside `run`.
//!
//! Server-rendered HTML over a [`crate::stores::ReviewStore`] (a JSONL output directory or ClickHouse):
//!
//! - `GET /` — the overview per (app, agent, agent version): volumes, Φ distribution, tier
//!   shares, line-rate and estimated share correct with intervals, alerts;
//! - `GET /queue?app=&agent=&version=&metric=&alert=&reviewer=` — the review queue, ordered by
//!   how informative a label would be ([`view::queue`]);
//! - `GET /event/{id}` — an event's inputs, every metric row with its components and details
//!   rendered for people, its labels, the raw JSON, and the label form (keys c / x / u, n next);
//! - `POST /label` — store a label (validated by [`crate::review::HumanLabel::validated`]),
//!   then go to the next event of the same queue;
//! - `GET /api/labels` — the labels as JSON lines (what `calibrate` reads).
//!
//! Safe by default: `serve` binds 127.0.0.1 unless told otherwise; with `[server] token` every
//! request must carry it (bearer or basic-auth password) and a wrong one is answered 401; the
//! comparison does not stop at the first differing byte. Every page is escaped
//! ([`pages`]) and carries a Content-Security-Policy without inline script; a label POST from
//! another origin is refused. No secret is ever rendered (the footer names the store without
//! credentials).

pub mod agreement;
pub mod breakdown;
pub mod config;
pub mod monitor;
pub mod pages;
mod routes;
pub mod view;

pub use routes::{QUEUE_LIMIT, ReviewServer, ReviewState, router, serve};
