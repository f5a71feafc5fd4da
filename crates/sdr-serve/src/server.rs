//! The listening loop: HTTP/1 connections driven with a timer, stopped by a signal.

use std::time::Duration;

use crate::api::{router, AppState};
use crate::log::log_line;

/// Serve until `shutdown` resolves, then finish the requests in flight.
///
/// hyper's HTTP/1 connections are driven here rather than by `axum::serve`,
/// which gives hyper no timer: without one, a client that stalls while sending
/// its headers (or an idle keep-alive connection) holds its connection and
/// file descriptor for ever. With it, `Limits::header_timeout` closes them.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    path: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let header_timeout = state.limits().header_timeout;
    let app = router(state, path);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout);
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    if let Some(pause) = accept_failed(&e) {
                        tokio::select! {
                            () = tokio::time::sleep(pause) => continue,
                            () = &mut shutdown => break,
                        }
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection =
            connections.watch(http.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A connection's errors (a client gone, headers too slow) are its own.
            let _ = connection.await;
        });
    }
    // Stop accepting, let requests in flight finish, close idle connections.
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// How long to pause after a failed `accept`: not at all for a connection
/// reset before it was accepted (the client's affair); a second, logged, for
/// anything else (such as running out of file descriptors, when connections
/// may have closed by then).
fn accept_failed(e: &std::io::Error) -> Option<Duration> {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return None;
    }
    log_line(format_args!(
        "sdr serve: cannot accept a connection: {e} (retrying in 1 s)"
    ));
    Some(Duration::from_secs(1))
}

/// Serve until SIGINT or SIGTERM, let the requests in flight finish, then save
/// the persisted sentence cache (if any), logging what happened.
pub async fn serve_until_signal(
    listener: tokio::net::TcpListener,
    state: AppState,
    path: &str,
) -> std::io::Result<()> {
    let result = serve(listener, state.clone(), path, shutdown_signal()).await;
    match state.save_cache() {
        Some(Ok(n)) if n > 0 => log_line(format_args!("sdr serve: saved {n} cached sentences")),
        Some(Err(e)) => log_line(format_args!(
            "sdr serve: could not save the sentence cache: {e}"
        )),
        _ => {}
    }
    result
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    log_line("sdr serve: shutting down (finishing requests in flight)");
}
