//! The explorer behind a local HTTP socket (tiny_http, one request at a time: the page
//! makes few requests, and each range is one engine run using every core already).
//!
//! Read-only: GET and HEAD only. A request whose `Host` is not the address served (or
//! `localhost`) is refused, so a web page elsewhere cannot reach the trace through DNS
//! rebinding.

use crate::{ExploreError, Explorer, Response};
use std::net::SocketAddr;
use tiny_http::{Header, Method, Server};

/// A bound socket, ready to [`Listener::run`].
pub struct Listener {
    server: Server,
    addr: SocketAddr,
}

impl Listener {
    /// Listen on `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddr) -> Result<Listener, ExploreError> {
        let server = Server::http(addr).map_err(|e| ExploreError::Bind {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| ExploreError::Bind {
                addr: addr.to_string(),
                reason: "not an IP socket".into(),
            })?;
        Ok(Listener { server, addr })
    }

    /// The address listened on (the port resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Answer requests until the process ends (or the socket fails).
    pub fn run(&self, explorer: &Explorer) {
        for req in self.server.incoming_requests() {
            let resp = self.answer(explorer, req.method(), req.url(), host_of(&req));
            let head = *req.method() == Method::Head;
            let mut r = tiny_http::Response::from_data(if head { Vec::new() } else { resp.body })
                .with_status_code(resp.status)
                // Always a Content-Length: simple clients (and curl users) read it whole.
                .with_chunked_threshold(usize::MAX);
            for (k, v) in [
                ("Content-Type", resp.content_type),
                ("Cache-Control", "no-store"),
                ("X-Content-Type-Options", "nosniff"),
                (
                    "Content-Security-Policy",
                    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'",
                ),
            ] {
                if let Ok(h) = Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                    r.add_header(h);
                }
            }
            // A client that went away is no error of ours.
            let _ = req.respond(r);
        }
    }

    fn answer(
        &self,
        explorer: &Explorer,
        method: &Method,
        url: &str,
        host: Option<String>,
    ) -> Response {
        let refuse = |status: u16, message: String| Response {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(&serde_json::json!({ "error": message })).unwrap_or_default(),
        };
        if !matches!(method, Method::Get | Method::Head) {
            return refuse(
                405,
                format!("{method} not allowed: this server is read-only"),
            );
        }
        match host {
            Some(h) if self.host_allowed(&h) => explorer.handle(url),
            h => refuse(
                403,
                format!("Host {h:?} is not this server ({}): refused", self.addr),
            ),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let port = self.addr.port();
        let ok = [
            self.addr.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        ok.iter().any(|a| a.eq_ignore_ascii_case(host))
    }
}

fn host_of(req: &tiny_http::Request) -> Option<String> {
    req.headers()
        .iter()
        .find(|h| h.field.equiv("Host"))
        .map(|h| h.value.as_str().to_string())
}
