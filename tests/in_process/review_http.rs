//! The review page inside a running daemon (`[server] review = true`) over HTTP: the token
//! guards the pages but not the health endpoint, label writes are validated (unknown verdict,
//! unknown event, another origin), stored labels show up escaped, and the page never renders
//! the token.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sqlgrade_testkit::servers as support;

const TOKEN: &str = "review-s3cret-token";

struct Daemon(Child);

impl Daemon {
    /// `sqlgrade run --config <config>` from the repository, with the review token `token`
    /// (none: the variable removed), its output discarded.
    fn run(config: &std::path::Path, token: Option<&str>) -> Daemon {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sqlgrade"));
        command
            .args(["run", "--config"])
            .arg(config)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match token {
            Some(token) => command.env("SQLGRADE__SERVER__TOKEN", token),
            None => command.env_remove("SQLGRADE__SERVER__TOKEN"),
        };
        Daemon(command.spawn().unwrap())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_pages_inside_run_are_guarded_and_validated() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let port = support::free_port();
    let config = dir.path().join("sqlgrade.toml");
    let events = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/events.jsonl");
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"file\"\npath = {events:?}\nfollow = true\n\n\
             [sink]\nkind = \"jsonl\"\ndir = {out:?}\n\n\
             [server]\nlisten = \"127.0.0.1:{port}\"\nreview = true\n"
        ),
    )
    .unwrap();
    let _daemon = Daemon::run(&config, Some(TOKEN));
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    // Wait until the run has written its rows (the example has 437 events).
    let mut ready = false;
    for _ in 0..300 {
        if let Ok(r) = http.get(format!("{base}/readyz")).send().await
            && r.status() == 200
            && ["inputs.jsonl", "evaluations.jsonl"].iter().all(|f| {
                std::fs::read_to_string(out.join(f)).is_ok_and(|t| t.lines().count() >= 400)
            })
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the daemon did not come up");

    // The token guards the pages, not the health endpoint.
    assert_eq!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let denied = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(denied.status(), 401);
    assert!(denied.headers().contains_key("www-authenticate"));
    let wrong = http
        .get(format!("{base}/"))
        .bearer_auth("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let page = http
        .get(format!("{base}/"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("sql-copilot"),
        "the overview lists the series"
    );
    assert!(!html.contains(TOKEN), "the token is never rendered");
    // The judges that scored each series, with their identity, and the calibration slice.
    assert!(
        html.contains("id=\"judges\"") && html.contains("deterministic sqlgrade="),
        "the overview lists the judges"
    );
    let calibration = http
        .get(format!("{base}/queue?slice=calibration"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sampled = calibration.matches("class=\"event-link\"").count();
    assert!(calibration.contains("id=\"calibration-note\""));
    assert!(
        (1..400).contains(&sampled),
        "a small uniform sample per judge and week: {sampled}"
    );
    let basic = http
        .get(format!("{base}/queue"))
        .basic_auth("ana", Some(TOKEN))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 200);
    let queue = basic.text().await.unwrap();
    let first = queue
        .split("class=\"event-link\" href=\"/event/")
        .nth(1)
        .and_then(|s| s.split('?').next())
        .expect("the queue lists events")
        .to_string();

    let post = |form: Vec<(&'static str, String)>, origin: &str| {
        http.post(format!("{base}/label"))
            .bearer_auth(TOKEN)
            .header("origin", origin)
            .form(&form)
    };
    let here = format!("http://127.0.0.1:{port}");
    let here = here.as_str();
    // Validation: a verdict that is not one of three, an unknown event, another origin.
    let bad = post(
        vec![
            ("event_id", first.clone()),
            ("reviewer", "ana".into()),
            ("verdict", "<b>maybe</b>".into()),
        ],
        here,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(bad.status(), 422);
    let body = bad.text().await.unwrap();
    assert!(body.contains("Label not saved"), "{body}");
    assert!(!body.contains("<b>maybe"), "the refused value is escaped");
    let unknown = post(
        vec![
            ("event_id", "no-such-event".into()),
            ("reviewer", "ana".into()),
            ("verdict", "correct".into()),
        ],
        here,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(unknown.status(), 404);
    let cross = post(
        vec![
            ("event_id", first.clone()),
            ("reviewer", "ana".into()),
            ("verdict", "correct".into()),
        ],
        "http://evil.example",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(cross.status(), 403);
    assert!(!out.join("labels.jsonl").exists(), "nothing was stored");

    // A good label is stored, and the event page shows its hostile note as text.
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let saved = no_redirect
        .post(format!("{base}/label"))
        .bearer_auth(TOKEN)
        .header("origin", here)
        .form(&[
            ("event_id", first.as_str()),
            ("reviewer", "ana"),
            ("verdict", "incorrect"),
            ("category", "wrong_column"),
            ("note", "<script>alert(1)</script>"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(saved.status(), 303);
    let next = saved.headers()["location"].to_str().unwrap();
    assert!(
        next.starts_with("/event/") && next.contains("reviewer=ana"),
        "{next}"
    );
    let labels = std::fs::read_to_string(out.join("labels.jsonl")).unwrap();
    assert!(labels.contains("\"verdict\":\"incorrect\""), "{labels}");
    let event = http
        .get(format!("{base}/event/{first}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(event.contains("&lt;script&gt;alert(1)"), "note escaped");
    assert!(!event.contains("<script>alert"), "no injected script");
    let missing = http
        .get(format!("{base}/event/nope"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// The review page's doors (issue 79): `run` refuses to serve it beyond localhost without a
/// token; without a token, a request whose `Host` is a foreign name (a DNS-rebinding page) is
/// refused, reads and label writes alike; and 200 connections that never finish their request
/// headers are closed by the server within 40 s while it keeps answering others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_page_doors_host_check_and_half_sent_connections() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let events = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/events.jsonl");
    let config_on = |listen: &str| {
        let config = dir
            .path()
            .join(format!("{}.toml", listen.replace([':', '.'], "_")));
        std::fs::write(
            &config,
            format!(
                "[source]\nkind = \"file\"\npath = {events:?}\nfollow = true\n\n\
                 [sink]\nkind = \"jsonl\"\ndir = {out:?}\n\n\
                 [server]\nlisten = \"{listen}\"\nreview = true\n"
            ),
        )
        .unwrap();
        config
    };

    // Beyond localhost without a token: refused at once, with the reason.
    let refused = Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
        .args(["run", "--config"])
        .arg(config_on("0.0.0.0:0"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("SQLGRADE__SERVER__TOKEN")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("needs [server] token"), "{said}");

    // On localhost without a token: served, but only to IP addresses and `localhost`.
    let port = support::free_port();
    let _daemon = Daemon::run(&config_on(&format!("127.0.0.1:{port}")), None);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..300 {
        if let Ok(r) = http.get(format!("{base}/")).send().await
            && r.status() == 200
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "the review page did not come up");
    let page = http
        .get(format!("{base}/"))
        .header("Host", format!("localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let foreign = format!("rebind.attacker.example:{port}");
    let read = http
        .get(format!("{base}/api/labels"))
        .header("Host", &foreign)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 421, "a foreign Host read the labels");
    let write = http
        .post(format!("{base}/label"))
        .header("Host", &foreign)
        .header("Origin", format!("http://{foreign}"))
        .form(&[("event_id", "ev-1"), ("verdict", "incorrect")])
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), 421, "a foreign Host posted a label");
    assert!(
        !out.join("labels.jsonl").exists()
            || !std::fs::read_to_string(out.join("labels.jsonl"))
                .unwrap()
                .contains("ev-1"),
        "the label was stored"
    );

    // 200 connections that send half a request and stop.
    let mut half_sent = Vec::new();
    for _ in 0..200 {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        use tokio::io::AsyncWriteExt as _;
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        half_sent.push(stream);
    }
    // The server still answers a well-formed request meanwhile.
    let still = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(still.status(), 200);
    let started = std::time::Instant::now();
    for mut stream in half_sent {
        use tokio::io::AsyncReadExt as _;
        let mut buf = [0u8; 1024];
        // Closed by the server: the read ends (EOF, an error response, or a reset).
        let left = Duration::from_secs(40).saturating_sub(started.elapsed());
        let closed = tokio::time::timeout(left, async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(
            closed.is_ok(),
            "a half-sent connection was still open after 40 s"
        );
    }
    eprintln!(
        "200 half-sent connections closed after {:?}",
        started.elapsed()
    );
}
