//! The Grafana dashboard (`sqs-engine.json`) and Prometheus alerting rules (`rules.yml`) of
//! sqs-engine live beside this crate; its test (`tests/prometheus.rs`) runs a load test with
//! the Prometheus exporter, scrapes it with a real Prometheus server, and checks that every
//! dashboard query and rule returns data and names only metrics the engine exports.
