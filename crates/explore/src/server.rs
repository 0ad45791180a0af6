//! The explorer behind a local HTTP socket (tiny_http, one request at a time: the page
//! makes few requests, and each range is one engine run using every core already).
//!
//! Read-only: GET and HEAD only. What a web page elsewhere could make a browser send is
//! refused:
//!
//! * a `Host` that is not this server: the address served, `localhost`/loopback, and on a
//!   wildcard bind (`0.0.0.0`, `::`) any address of this machine or its host name, each
//!   with the port (403: DNS rebinding);
//! * an `/api/` request from another origin: an `Origin` that is not
//!   `http://` + the request's `Host`, or `Sec-Fetch-Site: cross-site`/`same-site` (403:
//!   a page elsewhere cannot keep the engine busy through the loopback socket);
//! * a request line over [`MAX_URL`] bytes (414) or headers over [`MAX_HEADERS`] (431).
//!
//! Every answer forbids framing (`frame-ancestors 'none'`, `X-Frame-Options: DENY`).

use crate::{ExploreError, Explorer, Response};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tiny_http::{Header, Method, Server};

/// Longest URL (path and query) answered: the page's longest is a frame's path in
/// `/api/waits`, a few KB at most.
pub const MAX_URL: usize = 16 * 1024;
/// Most bytes of request headers (names and values) answered.
pub const MAX_HEADERS: usize = 16 * 1024;

/// The headers of every answer besides its type.
/// Requests answered at once ([`Listener::run`]).
pub const WORKERS: usize = 4;

const SECURITY_HEADERS: [(&str, &str); 5] = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    (
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
         frame-ancestors 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
];

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

    /// The page's URL; on a wildcard bind, the URLs it answers on, space-separated:
    /// loopback first, then each address of this machine, then its host name.
    pub fn url(&self) -> String {
        self.urls().join(" ")
    }

    /// The page's URLs: the address served, or on a wildcard bind loopback, this
    /// machine's addresses (not link-local: those need an interface in the URL) and its
    /// host name.
    pub fn urls(&self) -> Vec<String> {
        let port = self.addr.port();
        if !self.addr.ip().is_unspecified() {
            return vec![format!("http://{}/", self.addr)];
        }
        let v6 = self.addr.is_ipv6();
        let lo = if v6 {
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        };
        let mut out = vec![format!("http://{}/", SocketAddr::new(lo, port))];
        for ip in machine_addrs() {
            // An IPv4 socket is not reached at an IPv6 address (an IPv6 one, dual-stack,
            // is reached at both).
            if ip.is_loopback() || link_local(&ip) || (!v6 && ip.is_ipv6()) {
                continue;
            }
            out.push(format!("http://{}/", SocketAddr::new(ip, port)));
        }
        if let Some(h) = host_name() {
            out.push(format!("http://{h}:{port}/"));
        }
        out
    }

    /// Answer requests until the process ends (or the socket fails), [`WORKERS`] at a
    /// time: a range's waits or critical path that takes seconds does not hold up the
    /// page's other requests (`/api/info`, a new range).
    pub fn run(&self, explorer: &Explorer) {
        std::thread::scope(|s| {
            for i in 0..WORKERS {
                let spawned = std::thread::Builder::new()
                    .name(format!("serve-{i}"))
                    .spawn_scoped(s, || self.answer_requests(explorer));
                if spawned.is_err() && i == 0 {
                    // No thread to spare: answer on this one.
                    self.answer_requests(explorer);
                }
            }
        });
    }

    /// One worker of [`Listener::run`]: answer requests until the socket fails.
    fn answer_requests(&self, explorer: &Explorer) {
        while let Ok(req) = self.server.recv() {
            let headers: Vec<(String, String)> = req
                .headers()
                .iter()
                .map(|h| (h.field.as_str().to_string(), h.value.as_str().to_string()))
                .collect();
            let url = req.url().to_string();
            let resp = self.answer(explorer, req.method(), &url, &headers);
            let head = *req.method() == Method::Head;
            let mut r = tiny_http::Response::from_data(if head { Vec::new() } else { resp.body })
                .with_status_code(resp.status)
                // Always a Content-Length: simple clients (and curl users) read it whole.
                .with_chunked_threshold(usize::MAX);
            for (k, v) in [("Content-Type", resp.content_type)]
                .into_iter()
                .chain(SECURITY_HEADERS)
            {
                if let Ok(h) = Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                    r.add_header(h);
                }
            }
            // A client that went away is no error of ours.
            let _ = req.respond(r);
            if url_runs_engine(&url) {
                release_freed_memory();
            }
        }
    }

    /// The answer to a request: refused (405, 414, 431, 403) or the explorer's.
    fn answer(
        &self,
        explorer: &Explorer,
        method: &Method,
        url: &str,
        headers: &[(String, String)],
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
        if url.len() > MAX_URL {
            return refuse(
                414,
                format!(
                    "URL of {} bytes refused: at most {MAX_URL} are answered",
                    url.len()
                ),
            );
        }
        let size: usize = headers.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
        if size > MAX_HEADERS {
            return refuse(
                431,
                format!(
                    "request headers of {size} bytes refused: at most {MAX_HEADERS} are answered"
                ),
            );
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let host = match header("Host") {
            Some(h) if self.host_allowed(h) => h,
            h => {
                return refuse(
                    403,
                    format!("Host {h:?} is not this server ({}): refused", self.addr),
                )
            }
        };
        if url.starts_with("/api/") {
            if let Some(o) = header("Origin") {
                if !o.eq_ignore_ascii_case(&format!("http://{host}")) {
                    return refuse(
                        403,
                        format!("Origin {o:?} is not this page (http://{host}): refused"),
                    );
                }
            }
            if let Some(s @ ("cross-site" | "same-site")) = header("Sec-Fetch-Site") {
                return refuse(
                    403,
                    format!("a request from another site (Sec-Fetch-Site: {s}): refused"),
                );
            }
        }
        explorer.handle(url)
    }

    /// Whether `host` (a `Host` header: name or address, and port) names this server.
    fn host_allowed(&self, host: &str) -> bool {
        let port = self.addr.port();
        let Some((name, p)) = host.rsplit_once(':') else {
            return false;
        };
        if p.parse::<u16>() != Ok(port) {
            return false;
        }
        if host.eq_ignore_ascii_case(&self.addr.to_string())
            || ["localhost", "127.0.0.1", "[::1]"]
                .iter()
                .any(|n| n.eq_ignore_ascii_case(name))
        {
            return true;
        }
        if !self.addr.ip().is_unspecified() {
            return false;
        }
        // A wildcard bind: any address of this machine, or its host name.
        let literal = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        match literal.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || machine_addrs().contains(&ip),
            Err(_) => host_name().is_some_and(|h| h.eq_ignore_ascii_case(name)),
        }
    }
}

/// Whether a request runs the engine (a range's graph, a frame's waits, a critical path):
/// it clones a checkpoint's engine and builds its answer, hundreds of MB on a big trace,
/// all freed by the time it is answered.
fn url_runs_engine(url: &str) -> bool {
    ["/api/chains", "/api/waits", "/api/critpath"]
        .iter()
        .any(|p| url.starts_with(p))
}

/// Give the pages of freed memory back to the system: glibc's allocator keeps the arenas
/// of a request's engine copy and answer (on busy20m the server stayed at ~780 MB after a
/// few ranges instead of its ~670 MB after indexing).
fn release_freed_memory() {
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it takes no pointer
    // and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => (a.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// This machine's name (`/proc/sys/kernel/hostname`), unless unset.
fn host_name() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim();
    (!h.is_empty() && h != "(none)").then(|| h.to_string())
}

/// The addresses of this machine's interfaces, read afresh (they change): IPv4 from the
/// kernel's local routes (`/proc/net/fib_trie`, its `/32 host LOCAL` entries), IPv6 from
/// `/proc/net/if_inet6`.
pub fn machine_addrs() -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    if let Ok(t) = std::fs::read_to_string("/proc/net/fib_trie") {
        let mut last: Option<Ipv4Addr> = None;
        for l in t.lines() {
            let l = l.trim_start();
            if let Some(a) = l.strip_prefix("|-- ") {
                last = a.trim().parse().ok();
            } else if l.starts_with("/32 host LOCAL") {
                if let Some(a) = last {
                    if !out.contains(&IpAddr::V4(a)) {
                        out.push(IpAddr::V4(a));
                    }
                }
            }
        }
    }
    if let Ok(t) = std::fs::read_to_string("/proc/net/if_inet6") {
        for l in t.lines() {
            let Some(hex) = l.split_whitespace().next() else {
                continue;
            };
            if let Ok(n) = u128::from_str_radix(hex, 16) {
                let a = IpAddr::V6(Ipv6Addr::from(n));
                if hex.len() == 32 && !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_has_loopback_addresses() {
        let a = machine_addrs();
        assert!(a.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{a:?}");
    }
}
