//! The review page's routes: the shared state, the handlers (overview, queue, event, label,
//! the labels API), the token guard and the security headers, and the server (module
//! documentation of `serve`).
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::view::QueueFilter;
use crate::evaluation::Metric;
use crate::review::{ERROR_CATEGORIES, HumanLabel, url_component};
use crate::settings::Secret;
use crate::stores::{ReviewStore, StoreError};

/// How many events a queue page lists.
pub const QUEUE_LIMIT: usize = 200;

/// What every handler shares.
pub struct ReviewState {
    store: Arc<dyn ReviewStore>,
    token: Option<Secret>,
    /// `[server] allowed_hosts`, lower-cased.
    allowed_hosts: Vec<String>,
    env: minijinja::Environment<'static>,
    calibration: super::view::CalibrationSample,
    model: Arc<crate::stef::correctness::VerdictModel>,
}

impl ReviewState {
    /// Pages over `store`; with `token`, every request must carry it.
    pub fn new(store: Arc<dyn ReviewStore>, token: Option<Secret>) -> ReviewState {
        ReviewState {
            store,
            token: token.filter(|t| !t.expose().trim().is_empty()),
            allowed_hosts: Vec::new(),
            env: super::pages::environment(),
            calibration: super::view::CalibrationSample::default(),
            model: Arc::new(crate::stef::correctness::VerdictModel::shipped().clone()),
        }
    }

    /// The correctness model whose contributions an event page shows (`[stef] model`, else
    /// the shipped one).
    pub fn with_model(mut self, model: Arc<crate::stef::correctness::VerdictModel>) -> ReviewState {
        self.model = model;
        self
    }

    /// Host names answered besides IP addresses and `localhost` (`[server] allowed_hosts`).
    pub fn with_allowed_hosts(mut self, hosts: &[String]) -> ReviewState {
        self.allowed_hosts = hosts
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        self
    }

    /// The queue's calibration slice: `per_week` events per judge identity and week, drawn
    /// with `salt` (`[server] calibration_per_week`, `calibration_salt`).
    pub fn with_calibration(mut self, sample: super::view::CalibrationSample) -> ReviewState {
        self.calibration = sample;
        self
    }
}

/// The review routes (to serve alone or merge into the health endpoint's router).
pub fn router(state: Arc<ReviewState>) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/queue", get(queue))
        .route("/next", get(next))
        .route("/event/{id}", get(event))
        .route("/label", post(label))
        .route("/api/labels", get(labels_json))
        .route("/static/review.js", get(script))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            guard,
        ))
        .with_state(state)
}

/// A running review server.
pub struct ReviewServer {
    /// The bound address (useful with port 0).
    pub local_addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ReviewServer {
    /// Wait until the server stops (it runs until the process ends).
    pub async fn wait(self) {
        let _ = self.task.await;
    }

    /// Stop serving.
    pub fn stop(&self) {
        self.task.abort();
    }
}

/// Bind `listen` and serve the review pages in a background task.
pub async fn serve(
    listen: &str,
    state: Arc<ReviewState>,
) -> Result<ReviewServer, crate::telemetry::health::HealthError> {
    let (listener, local_addr) = crate::telemetry::health::bind(listen).await?;
    if state.token.is_none() && !local_addr.ip().is_loopback() {
        return Err(crate::telemetry::health::HealthError::Refused(
            super::config::unprotected_review(listen),
        ));
    }
    let app = router(state);
    let task = tokio::spawn(crate::telemetry::health::serve_bounded(
        listener,
        app,
        crate::telemetry::health::ConnectionLimits::default(),
        std::future::pending(),
    ));
    tracing::info!(%local_addr, "review page listening");
    Ok(ReviewServer { local_addr, task })
}

/// Authentication, the same-origin check on writes, and the security headers of every page.
async fn guard(State(state): State<Arc<ReviewState>>, request: Request, next: Next) -> Response {
    if !host_allowed(request.headers(), &state) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this host name is not served here ([server] allowed_hosts)",
        )
            .into_response();
    }
    if let Some(token) = &state.token
        && !authorised(request.headers(), token.expose())
    {
        let mut response = (StatusCode::UNAUTHORIZED, "authentication required").into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"sqlgrade review\""),
        );
        return response;
    }
    if request.method() == axum::http::Method::POST && !same_origin(request.headers()) {
        return (StatusCode::FORBIDDEN, "cross-origin write refused").into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self'; \
             form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` on a
    // form POST, and the same-origin check above could not tell the page's own forms apart.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Whether the request's `Host` may be answered: an IP address or `localhost` always (no other
/// site can make a browser send those as its own name), a name of `[server] allowed_hosts`, or
/// — with a token and no list — any. Without a token a page on another site that rebinds its
/// own name to this address would otherwise read events and post labels as same-origin.
fn host_allowed(headers: &HeaderMap, state: &ReviewState) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        // Not a browser (HTTP/1.0 tools); browsers always send it.
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = host_name(host).to_ascii_lowercase();
    if name == "localhost" || name.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    if state.allowed_hosts.is_empty() {
        return state.token.is_some();
    }
    state.allowed_hosts.contains(&name)
}

/// The name in a `Host` header, without its port (`[::1]:8089` → `::1`).
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(ip, _)| ip);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Whether the request carries `token` as a bearer token or a basic-auth password.
fn authorised(headers: &HeaderMap, token: &str) -> bool {
    use base64::Engine as _;
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    if let Some(bearer) = value.strip_prefix("Bearer ") {
        return crate::settings::same_secret(bearer.trim(), token);
    }
    if let Some(basic) = value.strip_prefix("Basic ")
        && let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(basic.trim())
        && let Ok(text) = String::from_utf8(decoded)
        && let Some((_, password)) = text.split_once(':')
    {
        return crate::settings::same_secret(password, token);
    }
    false
}

/// A write is same-origin when its `Origin` (or, failing that, `Referer`) names the `Host` it
/// was sent to; a browser always sends one of them on a form POST. Clients without either (curl,
/// scripts) are not browsers and need the token anyway when one is set.
fn same_origin(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok());
    match (origin, host) {
        (None, _) => true,
        (Some(origin), Some(host)) => {
            let rest = origin.split_once("://").map_or(origin, |(_, r)| r);
            rest.split('/').next() == Some(host)
        }
        (Some(_), None) => false,
    }
}

fn store_error(error: &StoreError) -> Response {
    tracing::error!(error = %error, "review store failed");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the review store failed: {error}"),
    )
        .into_response()
}

fn render(state: &ReviewState, template: &str, ctx: minijinja::Value) -> Response {
    let page = state.env.get_template(template).and_then(|t| {
        let source = state.store.describe();
        t.render(minijinja::context! { source, ..ctx })
    });
    match page {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::error!(template, error = %error, "review page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "page failed to render").into_response()
        }
    }
}

async fn script() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/javascript; charset=utf-8"),
        )],
        super::pages::SCRIPT,
    )
        .into_response()
}

/// An alert as the overview lists it.
#[derive(serde::Serialize)]
struct AlertLine {
    alert_id: String,
    state: &'static str,
    fired: String,
    series: String,
    metric: String,
    rule: String,
    baseline: f64,
    observed: f64,
    message: String,
}

async fn overview(
    State(state): State<Arc<ReviewState>>,
    Query(filter): Query<super::monitor::MonitorFilter>,
) -> Response {
    let (rows, alerts, labels) = match load(&state).await {
        Ok(v) => v,
        Err(e) => return store_error(&e),
    };
    let data = match state.store.monitor().await {
        Ok(data) => data,
        Err(e) => return store_error(&e),
    };
    let monitor = super::monitor::monitor(&data, &alerts, &filter);
    let where_wrong = match state.store.breakdown().await {
        Ok(data) => super::breakdown::where_wrong(&data, &filter),
        Err(e) => return store_error(&e),
    };
    let filtered = filter.is_set();
    let series: Vec<_> = super::view::overview(&rows, &alerts, &labels, &state.calibration)
        .into_iter()
        .filter(|s| filter.admits(&s.app, &s.agent, &s.version))
        .collect();
    let (judges, disagreement) = super::view::judges(&rows, &labels, &state.calibration);
    let reliability = super::view::reliability(&rows, &labels);
    let calibration_per_week = state.calibration.per_week;
    let alerts: Vec<AlertLine> = alerts
        .iter()
        .map(|a| AlertLine {
            alert_id: a.alert_id.clone(),
            state: if a.is_firing() { "firing" } else { "resolved" },
            fired: chrono::DateTime::from_timestamp(a.fired_at, 0)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default(),
            series: super::monitor::alert_series(a),
            metric: a.metric.clone(),
            rule: a.rule.clone(),
            baseline: a.baseline,
            observed: a.observed,
            message: a.message.clone(),
        })
        .collect();
    render(
        &state,
        "overview.html",
        minijinja::context! {
            series, alerts, judges, disagreement, calibration_per_week, reliability, monitor,
            where_wrong, filter, filtered, plot => super::monitor::PLOT,
        },
    )
}

/// The queue's query string.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(default)]
struct QueueQuery {
    app: String,
    agent: String,
    version: String,
    metric: String,
    alert: String,
    reviewer: String,
    /// `calibration`: the calibration sample's unlabelled events only.
    slice: String,
    /// `<dimension>:<element>` (`table:superhero`): only events whose line-rate row reads it.
    element: String,
}

impl QueueQuery {
    fn filter(&self, sample: &super::view::CalibrationSample) -> QueueFilter {
        let some = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
        QueueFilter {
            app: some(&self.app),
            agent: some(&self.agent),
            version: some(&self.version),
            metric: some(&self.metric),
            alert: some(&self.alert),
            reviewer: some(&self.reviewer),
            calibration: (self.slice.trim() == "calibration").then(|| sample.clone()),
            element: some(&self.element),
        }
    }

    /// The non-empty fields as a query string (to carry the queue through event pages).
    fn encode(&self) -> String {
        let pairs: Vec<(&str, &str)> = [
            ("app", &self.app),
            ("agent", &self.agent),
            ("version", &self.version),
            ("metric", &self.metric),
            ("alert", &self.alert),
            ("reviewer", &self.reviewer),
            ("slice", &self.slice),
            ("element", &self.element),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k, v.as_str()))
        .collect();
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    }

    fn decode(text: &str) -> QueueQuery {
        serde_urlencoded::from_str(text).unwrap_or_default()
    }
}

/// What every page computes over: the recent rows, the alerts, the labels.
type Loaded = (
    Arc<Vec<crate::stores::StoredRow>>,
    Vec<crate::stores::AlertView>,
    Vec<HumanLabel>,
);

async fn load(state: &ReviewState) -> Result<Loaded, StoreError> {
    Ok((
        state.store.rows().await?,
        state.store.alerts().await?,
        state.store.labels().await?,
    ))
}

fn queue_of(
    (rows, alerts, labels): &Loaded,
    query: &QueueQuery,
    sample: &super::view::CalibrationSample,
) -> Vec<super::view::QueueItem> {
    super::view::queue(rows, alerts, labels, &query.filter(sample), QUEUE_LIMIT)
}

async fn queue_items(
    state: &ReviewState,
    query: &QueueQuery,
) -> Result<Vec<super::view::QueueItem>, StoreError> {
    Ok(queue_of(&load(state).await?, query, &state.calibration))
}

async fn queue(State(state): State<Arc<ReviewState>>, Query(query): Query<QueueQuery>) -> Response {
    let items = match queue_items(&state, &query).await {
        Ok(items) => items,
        Err(e) => return store_error(&e),
    };
    let ids: Vec<String> = items.iter().map(|i| i.event_id.clone()).collect();
    let questions: HashMap<String, String> = match state.store.inputs_of(&ids).await {
        Ok(found) => found
            .into_iter()
            .map(|(id, i)| (id, i.question.chars().take(160).collect()))
            .collect(),
        Err(e) => return store_error(&e),
    };
    let encoded = query.encode();
    render(
        &state,
        "queue.html",
        minijinja::context! { items, questions, filter => query, query => encoded },
    )
}

/// The first event of the queue (labelled events of the reviewer drop out of it), or the queue
/// page when it is empty.
async fn next(State(state): State<Arc<ReviewState>>, Query(query): Query<QueueQuery>) -> Response {
    let encoded = query.encode();
    match queue_items(&state, &query).await {
        Ok(items) => match items.first() {
            Some(item) => Redirect::to(&format!(
                "/event/{}?{encoded}",
                url_component(&item.event_id)
            ))
            .into_response(),
            None => Redirect::to(&format!("/queue?{encoded}")).into_response(),
        },
        Err(e) => store_error(&e),
    }
}

/// The event page's query: the queue it was opened from, and a message after a label.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct EventQuery {
    #[serde(flatten)]
    queue: QueueQuery,
    saved: String,
}

async fn event(
    State(state): State<Arc<ReviewState>>,
    Path(event_id): Path<String>,
    Query(query): Query<EventQuery>,
) -> Response {
    event_page(&state, &event_id, &query.queue, &query.saved, None).await
}

async fn event_page(
    state: &ReviewState,
    event_id: &str,
    queue: &QueueQuery,
    saved: &str,
    error: Option<String>,
) -> Response {
    let (rows, inputs) = match state.store.event(event_id).await {
        Ok(found) => found,
        Err(e) => return store_error(&e),
    };
    if rows.is_empty() && inputs.is_none() {
        let mut page = render(
            state,
            "message.html",
            minijinja::context! { title => "No such event", text => format!("No rows for event {event_id}.") },
        );
        *page.status_mut() = StatusCode::NOT_FOUND;
        return page;
    }
    let loaded = match load(state).await {
        Ok(loaded) => loaded,
        Err(e) => return store_error(&e),
    };
    let next_id = queue_of(&loaded, queue, &state.calibration)
        .into_iter()
        .map(|i| i.event_id)
        .find(|id| id != event_id);
    let labels: Vec<HumanLabel> = loaded
        .2
        .into_iter()
        .filter(|l| l.event_id == event_id)
        .collect();
    let details: Vec<String> = rows
        .iter()
        .map(|r| super::pages::details_html(&r.details))
        .collect();
    let raw = serde_json::to_string_pretty(&serde_json::json!({ "inputs": inputs, "rows": rows }))
        .unwrap_or_default();
    let message = (!saved.is_empty()).then(|| format!("Label saved: {saved}."));
    let model = &state.model;
    let (contributions, model_note) = match rows.iter().find(|r| r.metric == Metric::Stef) {
        Some(row) => super::view::contributions(row, model, 6),
        None => (Vec::new(), None),
    };
    render(
        state,
        "event.html",
        minijinja::context! {
            event_id, inputs, rows, details, raw, labels, next_id, message, error,
            contributions, model_note,
            // Metrics shown in points (STEF's 0–100), and the line-rate metric whose row the
            // contributions explain.
            points_metrics => crate::evaluation::METRICS
                .iter()
                .filter(|e| e.scale > 1.0)
                .map(|e| e.name)
                .collect::<Vec<_>>(),
            line_metric => Metric::Stef.as_str(),
            model_version => model.version(),
            model_intercept => model.file().intercept,
            model_threshold => model.threshold(),
            reviewer => queue.reviewer.clone(),
            categories => ERROR_CATEGORIES,
            query => queue.encode(),
        },
    )
}

/// The label form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LabelForm {
    event_id: String,
    reviewer: String,
    verdict: String,
    category: String,
    note: String,
    /// The queue the event was opened from (a query string).
    query: String,
}

async fn label(State(state): State<Arc<ReviewState>>, Form(form): Form<LabelForm>) -> Response {
    let mut queue = QueueQuery::decode(&form.query);
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let label = match HumanLabel::validated(
        &form.event_id,
        &form.reviewer,
        &form.verdict,
        &form.category,
        &form.note,
        now,
    ) {
        Ok(label) => label,
        Err(e) => {
            let mut page = event_page(
                &state,
                form.event_id.trim(),
                &queue,
                "",
                Some(format!("Label not saved: {e}.")),
            )
            .await;
            if page.status() == StatusCode::OK {
                *page.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            }
            return page;
        }
    };
    match state.store.event(&label.event_id).await {
        Ok((rows, inputs)) if rows.is_empty() && inputs.is_none() => {
            return (StatusCode::NOT_FOUND, "no such event").into_response();
        }
        Ok(_) => {}
        Err(e) => return store_error(&e),
    }
    if let Err(e) = state.store.add_label(&label).await {
        return store_error(&e);
    }
    tracing::info!(event_id = %label.event_id, reviewer = %label.reviewer, verdict = label.verdict.as_str(), "label stored");
    // The next event of the same queue, without what this reviewer has labelled.
    queue.reviewer = label.reviewer.clone();
    let encoded = queue.encode();
    match queue_items(&state, &queue).await {
        Ok(items) => match items.first() {
            Some(item) => Redirect::to(&format!(
                "/event/{}?{encoded}&saved={}",
                url_component(&item.event_id),
                url_component(&format!("{} {}", label.event_id, label.verdict.as_str()))
            ))
            .into_response(),
            None => Redirect::to(&format!("/queue?{encoded}")).into_response(),
        },
        Err(e) => store_error(&e),
    }
}

async fn labels_json(State(state): State<Arc<ReviewState>>) -> Response {
    match state.store.labels().await {
        Ok(labels) => {
            let mut out = String::new();
            for l in &labels {
                if let Ok(line) = serde_json::to_string(l) {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/x-ndjson"),
                )],
                out,
            )
                .into_response()
        }
        Err(e) => store_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_accepted_as_bearer_or_basic_password_only() {
        use base64::Engine as _;
        let mut h = HeaderMap::new();
        assert!(!authorised(&h, "s3cret"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(authorised(&h, "s3cret"));
        assert!(!authorised(&h, "s3cre"));
        let basic = base64::engine::general_purpose::STANDARD.encode("ana:s3cret");
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {basic}")).unwrap(),
        );
        assert!(authorised(&h, "s3cret"));
        assert!(!authorised(&h, "other"));
    }

    #[test]
    fn writes_from_another_origin_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8089"));
        assert!(same_origin(&h), "no Origin: not a browser");
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8089"),
        );
        assert!(same_origin(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!same_origin(&h));
    }

    #[test]
    fn the_queue_travels_through_a_query_string() {
        let q = QueueQuery {
            app: "shop & co".into(),
            alert: "a/1".into(),
            ..QueueQuery::default()
        };
        let text = q.encode();
        assert_eq!(text, "app=shop+%26+co&alert=a%2F1");
        let back = QueueQuery::decode(&text);
        assert_eq!(back.app, "shop & co");
        assert_eq!(back.alert, "a/1");
    }
}
