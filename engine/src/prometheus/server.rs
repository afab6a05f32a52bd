//! The exporter's HTTP server: `/metrics`, `/healthz` and `/readyz`.

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_TYPE;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

use crate::health::{Health, registry};

/// Serves every connection `listener` accepts, for as long as the runtime runs.
pub(super) async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            Err(error) => {
                // Out of file descriptors, say: try again shortly rather than spin.
                tracing::warn!(%error, "the metrics listener could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = respond(request.method(), request.uri().path(), &handle);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "metrics connection ended with an error");
            }
        });
    }
}

/// The answer to `method path`.
fn respond(method: &Method, path: &str, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".to_owned());
    }
    match path {
        "/metrics" => {
            let mut response = text(StatusCode::OK, handle.render());
            response.headers_mut().insert(
                CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            response
        }
        "/healthz" => health_answer(&registry::snapshot(), Health::is_healthy),
        "/readyz" => health_answer(&registry::snapshot(), Health::is_ready),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /healthz, /readyz\n".to_owned(),
        ),
    }
}

/// 200 when there are engines and every one passes `check`, 503 otherwise; a line per engine.
fn health_answer(engines: &[Health], check: fn(&Health) -> bool) -> Response<Full<Bytes>> {
    if engines.is_empty() {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "no engine in this process\n".to_owned(),
        );
    }
    let passing = engines.iter().all(check);
    let body: String = engines.iter().map(|health| format!("{health}\n")).collect();
    let status = if passing {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    text(status, body)
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CallError, CallErrorKind};
    use crate::health::HealthCells;

    #[test]
    fn no_engine_is_not_ready_nor_healthy() {
        let answer = health_answer(&[], Health::is_healthy);
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn one_unhealthy_engine_fails_the_probe() {
        let good = HealthCells::new("good", Duration::from_secs(60));
        good.running();
        let bad = HealthCells::new("bad", Duration::from_secs(60));
        bad.running();
        let engines = [good.snapshot(), bad.snapshot()];
        assert_eq!(
            health_answer(&engines, Health::is_healthy).status(),
            StatusCode::OK
        );
        bad.receive_failed(&CallError::new(CallErrorKind::QueueNotFound, "gone"));
        let engines = [good.snapshot(), bad.snapshot()];
        let answer = health_answer(&engines, Health::is_healthy);
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            health_answer(&engines, Health::is_ready).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
