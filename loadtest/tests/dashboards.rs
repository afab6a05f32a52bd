//! The dashboard and the alerting rules, checked with real tools against a live engine.
//!
//! The files live in `dashboards/`; the test lives with the load test, whose binary it runs.
//!
//! A load test runs against LocalStack (a real SQS implementation) with the engine's Prometheus
//! exporter; `promtool` checks the rules and the exporter's output; a real Prometheus server
//! scrapes the run; then every query of every dashboard panel and every rule's query is
//! evaluated through Prometheus's HTTP API and must return data. A query that names a metric the
//! engine does not export fails, and so does a gauge the engine exports that no panel shows.
//!
//! Needs `prometheus` and `promtool` on the PATH (Debian's `prometheus` package, which
//! `scripts/test.sh` installs when missing) and LocalStack at `SQS_ENGINE_TEST_ENDPOINT`
//! (default `http://127.0.0.1:4566`).

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const MESSAGES: u32 = 4000;

/// Kills the processes this test started when it ends, however it ends.
struct Started(Vec<Child>);

impl Drop for Started {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_owned()
}

/// This package's `loadtest` binary, which cargo builds for this test, fresh, whatever the
/// target directory held before.
fn loadtest_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loadtest"))
}

fn tool(name: &str) -> PathBuf {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .expect("sh runs");
    let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    assert!(
        found.status.success() && !path.is_empty(),
        "`{name}` is not installed: install Debian's prometheus package (scripts/test.sh does)"
    );
    PathBuf::from(path)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn endpoint() -> String {
    std::env::var("SQS_ENGINE_TEST_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

fn http_get(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5", url])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn query(prometheus: &str, expr: &str) -> Value {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "10", "-G"])
        .arg(format!("{prometheus}/api/v1/query"))
        .arg("--data-urlencode")
        .arg(format!("query={expr}"))
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "Prometheus refused the query {expr}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("JSON from Prometheus")
}

fn wait_for(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every query of the dashboard, with Grafana's variables filled in.
fn dashboard_queries(queue: &str) -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(repo().join("dashboards/sqs-engine.json")).expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a query");
            let filled = expr
                .replace("$queue", queue)
                .replace("$__rate_interval", "1m")
                .replace("$price_per_million_requests", "0.40");
            assert!(!filled.contains('$'), "an unknown variable in {expr}");
            queries.push((panel["title"].as_str().unwrap_or("?").to_owned(), filled));
        }
    }
    assert!(queries.len() >= 20, "the dashboard has its panels");
    queries
}

/// The query part of every rule: each is written `(<query>) > <threshold>`.
fn rule_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join("dashboards/rules.yml")).expect("the rules");
    let mut rules = Vec::new();
    let mut name = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(alert) = line.strip_prefix("- alert:") {
            name = alert.trim().to_owned();
        } else if let Some(expr) = line.strip_prefix("expr:") {
            let expr = expr.trim();
            let close = expr
                .rfind(')')
                .expect("a rule is `(<query>) > <threshold>`");
            assert!(
                expr.starts_with('('),
                "a rule is `(<query>) > <threshold>`: {expr}"
            );
            rules.push((name.clone(), expr[1..close].to_owned()));
        }
    }
    assert!(rules.len() >= 4, "the rules file has its alerts");
    rules
}

/// The metric names a query mentions.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("sqs_engine_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        names.insert(expr[start..end].to_owned());
        i = end;
    }
    names
}

/// The names an exported metric appears under: histograms as their series.
fn exported_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for metric in sqs_engine::metrics::METRICS {
        match metric.kind {
            sqs_engine::metrics::MetricKind::Histogram => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{}{suffix}", metric.name));
                }
            }
            _ => {
                names.insert(metric.name.to_owned());
            }
        }
    }
    names
}

#[test]
fn every_dashboard_panel_and_rule_returns_data_from_a_live_engine() {
    let promtool = tool("promtool");
    let prometheus_bin = tool("prometheus");
    let loadtest = loadtest_bin();
    let rules = repo().join("dashboards/rules.yml");

    // The rules are valid.
    let checked = Command::new(&promtool)
        .arg("check")
        .arg("rules")
        .arg(&rules)
        .output()
        .expect("promtool runs");
    assert!(
        checked.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // Every metric a query names is one the engine exports.
    let exported = exported_names();
    let queue = format!("dashboards-{}-{}", std::process::id(), free_port());
    let dashboard = dashboard_queries(&queue);
    let rule_list = rule_queries();
    for (title, expr) in dashboard.iter().chain(&rule_list) {
        for name in metric_names(expr) {
            assert!(
                exported.contains(&name),
                "`{title}` queries {name}, which the engine does not export"
            );
        }
    }

    // Every gauge the engine exports is on the dashboard: what it holds, and what it parked.
    let shown: BTreeSet<String> = dashboard
        .iter()
        .flat_map(|(_, expr)| metric_names(expr))
        .collect();
    for metric in sqs_engine::metrics::METRICS {
        if metric.kind == sqs_engine::metrics::MetricKind::Gauge {
            assert!(
                shown.contains(metric.name),
                "the gauge {} is on no dashboard panel",
                metric.name
            );
        }
    }

    // A load test with the exporter on.
    let filled = Command::new(&loadtest)
        .args([
            "fill",
            "--create",
            "--queue",
            &queue,
            "--endpoint",
            &endpoint(),
        ])
        .args(["--messages", &MESSAGES.to_string()])
        .output()
        .expect("loadtest fill runs");
    assert!(
        filled.status.success(),
        "loadtest fill: {}",
        String::from_utf8_lossy(&filled.stderr)
    );
    let metrics_port = free_port();
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let mut started = Started(Vec::new());
    started.0.push(
        Command::new(&loadtest)
            .args(["consume", "--queue", &queue, "--endpoint", &endpoint()])
            .args(["--messages", &MESSAGES.to_string()])
            .args([
                "--workers",
                "8",
                "--receivers",
                "2",
                "--handler-delay-ms",
                "10",
            ])
            .args(["--retry-after-share", "0.1", "--retry-after-secs", "1"])
            .args(["--drop-share", "0.05"])
            .args([
                "--slow-share",
                "0.005",
                "--slow-ms",
                "5000",
                "--visibility-secs",
                "3",
            ])
            .args([
                "--max-attempts",
                "3",
                "--dead-letter",
                &format!("{queue}-dead"),
            ])
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .args(["--linger-secs", "120", "--timeout-secs", "150"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadtest consume starts"),
    );
    wait_for(Duration::from_secs(30), "the metrics endpoint", || {
        http_get(&metrics_url)
            .is_some_and(|text| text.contains("sqs_engine_messages_received_total"))
    });

    // A real Prometheus scrapes it every second and evaluates the rules.
    let data = std::env::temp_dir().join(format!("sqs-engine-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&data).expect("a data directory");
    let config = data.join("prometheus.yml");
    std::fs::File::create(&config)
        .and_then(|mut f| {
            write!(
                f,
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: loadtest\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n",
                rules.display()
            )
        })
        .expect("the Prometheus config");
    let prometheus_port = free_port();
    let prometheus = format!("http://127.0.0.1:{prometheus_port}");
    started.0.push(
        Command::new(&prometheus_bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                data.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );
    wait_for(Duration::from_secs(30), "Prometheus ready", || {
        http_get(&format!("{prometheus}/-/ready")).is_some()
    });

    // The exporter's output is valid exposition format, as promtool reads it.
    let exposition = http_get(&metrics_url).expect("the metrics endpoint answers");
    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    check
        .stdin
        .take()
        .expect("stdin")
        .write_all(exposition.as_bytes())
        .expect("promtool reads");
    let checked = check.wait_with_output().expect("promtool finishes");
    let complaints = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(
        checked.status.success(),
        "promtool check metrics: {complaints}"
    );

    // Let Prometheus collect the run: until every message is finished, and at least 20 s.
    let scraping = Instant::now();
    wait_for(Duration::from_secs(150), "the run to finish", || {
        let finished = query(
            &prometheus,
            &format!(
                "sum(sqs_engine_settlements_total{{queue=\"{queue}\",outcome=~\"ack|drop\",result=\"ok\"}})"
            ),
        );
        let value = finished["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        value >= f64::from(MESSAGES) && scraping.elapsed() >= Duration::from_secs(20)
    });

    let mut empty = Vec::new();
    for (title, expr) in dashboard.iter().chain(&rule_list) {
        let answer = query(&prometheus, expr);
        assert_eq!(answer["status"], "success", "`{title}`: {expr}: {answer}");
        let result = answer["data"]["result"].as_array().expect("a vector");
        if result.is_empty() {
            empty.push(format!("`{title}`: {expr}"));
        }
    }
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );
    println!(
        "{} dashboard queries and {} rule queries returned data",
        dashboard.len(),
        rule_list.len()
    );
    let _ = std::fs::remove_dir_all(&data);
}
