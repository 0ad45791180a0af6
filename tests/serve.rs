//! `chainrec serve` end to end: the range's chain graph over HTTP equals `chainrec chains
//! --window` of that range (same paths, same nanoseconds), the server refuses what a
//! read-only loopback page must refuse, and in headless chromium the page selects a
//! range on the heat map, draws exactly those frames, zooms on a click and lists the
//! waits through the frame, with no console error (screenshots kept to look at).

mod common;
use chainrec_testkit::devtools::{browser_available, Browser};
use common::{bin, tmpdir};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running `chainrec serve`, stopped when dropped.
struct Served {
    child: Child,
    host: String,
    /// The line that printed the URL(s).
    banner: String,
}

impl Served {
    fn start(trace: &Path) -> Served {
        Served::start_with(trace, &[])
    }

    fn start_with(trace: &Path, options: &[&str]) -> Served {
        Served::start_cmd(bin(), trace, options)
    }

    /// `chainrec serve` of the binary `cmd` runs (another build, for a benchmark).
    fn start_cmd(mut cmd: std::process::Command, trace: &Path, options: &[&str]) -> Served {
        let mut child = cmd
            .args(["serve", "--port", "0", "-q"])
            .args(options)
            .arg(trace)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        let (host, banner) = loop {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 {
                let _ = child.kill();
                panic!("chainrec serve ended before listening: {seen}");
            }
            seen += &line;
            if let Some(at) = line.find("http://") {
                let rest = &line[at + 7..];
                break (rest[..rest.find('/').unwrap()].to_string(), line.clone());
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Served {
            child,
            host,
            banner,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host)
    }

    /// A raw request; (status, body).
    fn request(&self, method: &str, path: &str, host: &str) -> (u16, String) {
        let (status, _, body) = request_to(&self.host, method, path, host, "");
        (status, body)
    }

    fn get(&self, path: &str) -> Value {
        let (status, body) = self.request("GET", path, &self.host.clone());
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

/// A raw request to `addr` with `Host: host` and `extra` header lines (each ending in
/// CRLF); (status, head, body).
fn request_to(
    addr: &str,
    method: &str,
    path: &str,
    host: &str,
    extra: &str,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_string(), body.to_string())
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn synth(dir: &Path, scenario: &str, events: u64) -> PathBuf {
    let path = dir.join(format!("{scenario}.zst"));
    let o = bin()
        .args([
            "synth",
            "--scenario",
            scenario,
            "--events",
            &events.to_string(),
            "-o",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path
}

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// `chainrec chains TRACE --window FROM..TO --unit ns`, summed per line.
/// A duration as the page prints it (app.js `fmtNs`).
fn fmt_ns_like_page(ns: u64) -> String {
    let f = ns as f64;
    if f >= 1e9 {
        format!("{:.3} s", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.2} ms", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1} us", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

fn chains_window(trace: &Path, from: u64, to: u64) -> BTreeMap<String, u64> {
    chains_window_with(trace, from, to, &[])
}

/// [`chains_window`] with more options (a thread filter).
fn chains_window_with(trace: &Path, from: u64, to: u64, extra: &[&str]) -> BTreeMap<String, u64> {
    let o = bin()
        .args(["chains", "--unit", "ns", "--window"])
        .arg(format!("{}..{}", secs(from), secs(to)))
        .args(extra)
        .arg(trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut out = BTreeMap::new();
    for l in String::from_utf8(o.stdout).unwrap().lines() {
        let (path, w) = l.rsplit_once(' ').unwrap();
        *out.entry(path.to_string()).or_insert(0) += w.parse::<u64>().unwrap();
    }
    out
}

/// The paths of a served tree (`nodes`: preorder, parent indices) that weigh something
/// themselves, as folded lines summed per text.
fn tree_lines(v: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (path, _, own) in chainrec_testkit::flat_tree::frames(v) {
        if own > 0 {
            *out.entry(path).or_insert(0) += own;
        }
    }
    out
}

#[test]
fn served_ranges_equal_chains_window() {
    let dir = tmpdir("serve-ranges");
    for (scenario, events) in [
        ("pipe-relay", 4000),
        ("lazy-stacks", 3000),
        ("busy-server", 150_000),
    ] {
        let trace = synth(&dir, scenario, events);
        let s = Served::start(&trace);
        let info = s.get("/api/info");
        let dur = info["duration_ns"].as_u64().unwrap();
        let heat = s.get("/api/heatmap");
        assert!(
            heat["total"].as_u64().unwrap() > 0,
            "{scenario}: empty heat map"
        );
        // The whole trace, a middle third, and a 20 ms heat-map cell.
        for (from, to) in [
            (0, dur),
            (dur / 3, 2 * dur / 3),
            (dur / 2, dur / 2 + 20_000_000),
        ] {
            let v = s.get(&format!("/api/chains?from={from}&to={to}"));
            let served = tree_lines(&v);
            let cli = chains_window(&trace, from, to);
            assert!(!cli.is_empty(), "{scenario} {from}..{to}: no chains");
            if v["pruned_frames"] == 0 {
                assert!(
                    served == cli,
                    "{scenario} {from}..{to}: the served graph differs from chains --window: {} vs {} lines",
                    served.len(),
                    cli.len()
                );
            } else {
                // A graph above 50 000 frames loses whole tiny subtrees: what is left is
                // exactly chains --window's lines of it.
                for (l, w) in &served {
                    assert_eq!(cli.get(l), Some(w), "{scenario} {from}..{to}: {l}");
                }
            }
            assert_eq!(
                v["nodes"][0]["value"].as_u64().unwrap(),
                cli.values().sum::<u64>(),
                "{scenario}"
            );
            // Merged below a pixel (`px=`, as the page asks): chains --window's lines
            // summed into the merged tree are exactly its frames' own weights, and the
            // total is the same.
            for px in [50, 1165] {
                let m = s.get(&format!("/api/chains?from={from}&to={to}&px={px}"));
                let summed = chainrec_testkit::flat_tree::merge_into(&m, &cli).unwrap();
                assert!(
                    summed == tree_lines(&m),
                    "{scenario} {from}..{to} px={px}: the merged graph's widths differ from chains --window's"
                );
                assert_eq!(m["rows"][0][2], v["nodes"][0]["value"], "{scenario}");
            }
        }
    }
}

/// A range in the middle of a trace of many small chunks resumes from a checkpoint (the
/// server says so in `/api/info`), and still equals `chains --window` of that range; so
/// does a range before the first checkpoint, decoded from the start.
#[test]
fn a_served_range_resumes_from_a_checkpoint() {
    use chainrec_format::synth::{self, SynthParams, Tracker};
    use chainrec_format::{TraceWriter, WriterOptions};
    let dir = tmpdir("serve-resume");
    let trace = dir.join("busy-small-chunks.zst");
    let params = SynthParams {
        events: 120_000,
        seed: 3,
    };
    let mut meta = synth::meta("busy-server", &params, vec![]);
    let opts = WriterOptions {
        chunk_events: 1500,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::create(&trace, &meta, opts).unwrap();
    let mut track = Tracker::new(&mut w);
    (synth::find("busy-server").unwrap().generate)(&params, &mut track).unwrap();
    track.complete(&mut meta);
    w.finish(&meta).unwrap();

    let s = Served::start_with(&trace, &["--checkpoint-every", "0.01"]);
    // Its first checkpoint would come after the trace's end: every range from the start.
    let from_start = Served::start_with(&trace, &["--checkpoint-every", "100000"]);
    // Checkpoints are taken in the background: wait for them (seconds at most).
    let t0 = Instant::now();
    let info = loop {
        let info = s.get("/api/info");
        if info["indexing"]["done"] == true {
            break info;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{info}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(info["indexing"]["error"], Value::Null, "{info}");
    assert_eq!(info["indexing"]["events"], info["events"], "{info}");
    let dur = info["duration_ns"].as_u64().unwrap();
    let points = info["checkpoints"].as_u64().unwrap();
    assert!(points >= 4, "{points} checkpoints over {dur} ns: {info}");
    let uses = |s: &Served| {
        let r = &s.get("/api/info")["ranges"];
        (
            r["resumed"].as_u64().unwrap(),
            r["from_start"].as_u64().unwrap(),
        )
    };
    assert_eq!(uses(&s), (0, 0));
    // (range, resumes): the middle resumes; a range from the trace start cannot.
    for ((from, to), resumes) in [
        ((dur / 2, dur / 2 + dur / 40), true),
        ((0, dur / 40), false),
    ] {
        let before = uses(&s);
        let v = s.get(&format!("/api/chains?from={from}&to={to}"));
        let after = uses(&s);
        let want = if resumes { (1, 0) } else { (0, 1) };
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            want,
            "{from}..{to}: (resumed, from start)"
        );
        assert_eq!(v["pruned_frames"], 0, "{from}..{to}");
        let served = tree_lines(&v);
        let cli = chains_window(&trace, from, to);
        assert!(cli.len() > 10, "{from}..{to}: {} lines", cli.len());
        assert!(
            served == cli,
            "{from}..{to}: the resumed graph differs from chains --window: {} vs {} lines",
            served.len(),
            cli.len()
        );
        // A frame's waits resume from the same checkpoint and are those of a run from
        // the trace start (a server without checkpoints).
        let frame = cli
            .keys()
            .next()
            .and_then(|l| l.split(';').next())
            .unwrap()
            .to_string();
        let frame: String = frame
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
                b => format!("%{b:02X}"),
            })
            .collect();
        let q = format!("/api/waits?frame={frame}&from={from}&to={to}&limit=5");
        let before = uses(&s);
        let waits = s.get(&q);
        let after = uses(&s);
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            want,
            "{q}: (resumed, from start)"
        );
        assert!(waits["matched_waits"].as_u64().unwrap() > 0, "{q}: {waits}");
        assert_eq!(waits, from_start.get(&q), "{q}");
    }
    // A bad spacing is refused.
    let o = bin()
        .args(["serve", "--checkpoint-every", "0"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "clap rejects it");
}

#[test]
fn the_server_is_read_only_and_loopback_only() {
    let dir = tmpdir("serve-refuses");
    let trace = synth(&dir, "pipe-relay", 1000);
    let s = Served::start(&trace);
    assert!(s.host.starts_with("127.0.0.1:"), "{}", s.host);
    let port = s.host.split(':').nth(1).unwrap().to_string();
    let me = s.host.clone();
    assert_eq!(s.request("POST", "/api/info", &me).0, 405);
    assert_eq!(s.request("PUT", "/", &me).0, 405);
    // DNS rebinding: a foreign Host is refused; localhost is fine.
    assert_eq!(s.request("GET", "/api/info", "evil.example:80").0, 403);
    assert_eq!(
        s.request("GET", "/api/info", &format!("localhost:{port}"))
            .0,
        200
    );
    let (st, body) = s.request("GET", "/../../etc/passwd", &me);
    assert_eq!(st, 404, "{body}");
    let (st, body) = s.request("GET", "/api/chains?from=1&to=0", &me);
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("is after"), "{body}");
    // HEAD: headers only.
    let (st, body) = s.request("HEAD", "/", &me);
    assert_eq!((st, body.as_str()), (200, ""));
    // Still serving after all that.
    assert!(s.get("/api/info")["events"].as_u64().unwrap() > 1000);
    // A non-loopback --bind is only taken when named, with a warning.
    let o = bin()
        .args(["serve", "--bind", "not-an-address"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "clap rejects it");
}

/// This machine's address toward the outside (the one its default route leaves from), if
/// it has one: a UDP socket's local address once "connected" (no packet is sent).
fn outward_ipv4() -> Option<std::net::IpAddr> {
    let u = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    u.connect("198.51.100.1:9").ok()?;
    let ip = u.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Issue 36 item 1: on `--bind 0.0.0.0` a request to this machine's address, with that
/// address in `Host`, is answered (it was refused: 403), as is one naming the host; a
/// foreign `Host` still is not (DNS rebinding); the URLs printed are usable ones (not
/// `0.0.0.0`).
#[test]
fn a_wildcard_bind_answers_this_machines_addresses() {
    let Some(ip) = outward_ipv4() else {
        eprintln!(
            "a_wildcard_bind_answers_this_machines_addresses: no non-loopback address: skipped"
        );
        return;
    };
    let dir = tmpdir("serve-wildcard");
    let trace = synth(&dir, "pipe-relay", 1000);
    let s = Served::start_with(&trace, &["--bind", "0.0.0.0"]);
    let port = s.host.rsplit(':').next().unwrap().to_string();
    let there = format!("{ip}:{port}");
    assert!(
        s.banner.contains(&format!("http://{there}/")),
        "the machine's URL printed: {}",
        s.banner
    );
    assert!(!s.banner.contains("0.0.0.0"), "{}", s.banner);
    let (st, _, body) = request_to(&there, "GET", "/api/info", &there, "");
    assert_eq!(st, 200, "Host {there}: {body}");
    let (st, _, body) = request_to(&there, "GET", "/", &there, "");
    assert_eq!(st, 200, "Host {there}: {body}");
    assert!(body.contains("<canvas"), "{body}");
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let named = format!("{}:{port}", name.trim());
    assert_eq!(request_to(&there, "GET", "/api/info", &named, "").0, 200);
    for evil in [
        format!("evil.example:{port}"),
        "evil.example".to_string(),
        format!("{ip}:1"),
        format!("{ip}.evil.example:{port}"),
    ] {
        let (st, _, body) = request_to(&there, "GET", "/api/info", &evil, "");
        assert_eq!(st, 403, "Host {evil}: {body}");
    }
}

/// Issue 36 item 2: a page elsewhere can make a browser send GETs to the loopback server
/// (with its `Host`); API requests from another origin are refused, the page's own are
/// answered; oversize URLs and headers are refused with a clear body; no page may frame
/// this one.
#[test]
fn requests_from_other_origins_and_oversize_ones_are_refused() {
    let dir = tmpdir("serve-origin");
    let trace = synth(&dir, "pipe-relay", 1000);
    let s = Served::start(&trace);
    let me = s.host.clone();
    let get = |path: &str, extra: &str| request_to(&me, "GET", path, &me, extra);
    for (extra, want) in [
        ("Origin: http://evil.example\r\n".to_string(), 403),
        ("Origin: null\r\n".to_string(), 403),
        (format!("Origin: https://{me}\r\n"), 403),
        ("Sec-Fetch-Site: cross-site\r\n".to_string(), 403),
        ("Sec-Fetch-Site: same-site\r\n".to_string(), 403),
        (format!("Origin: http://{me}\r\n"), 200),
        ("Sec-Fetch-Site: same-origin\r\n".to_string(), 200),
        ("Sec-Fetch-Site: none\r\n".to_string(), 200),
        (String::new(), 200),
    ] {
        for path in ["/api/info", "/api/waits?frame=x&limit=1"] {
            let (st, _, body) = get(path, &extra);
            assert_eq!(st, want, "{path} with {extra:?}: {body}");
            if want == 403 {
                assert!(body.contains("refused"), "{body}");
            }
        }
    }
    // A link from elsewhere still opens the page itself.
    assert_eq!(get("/", "Sec-Fetch-Site: cross-site\r\n").0, 200);
    // Oversize URL and headers.
    let long = format!("/api/info?x={}", "a".repeat(20_000));
    let (st, _, body) = get(&long, "");
    assert_eq!(st, 414, "{body}");
    assert!(body.contains("URL of 20"), "{body}");
    let big = format!("X-Big: {}\r\n", "b".repeat(20_000));
    let (st, _, body) = get("/api/info", &big);
    assert_eq!(st, 431, "{body}");
    assert!(body.contains("request headers of"), "{body}");
    // The page may not be framed.
    let (st, head, _) = get("/", "");
    assert_eq!(st, 200);
    let head = head.to_ascii_lowercase();
    assert!(head.contains("x-frame-options: deny"), "{head}");
    let csp = head
        .lines()
        .find(|l| l.starts_with("content-security-policy:"))
        .unwrap_or_default();
    assert!(csp.contains("frame-ancestors 'none'"), "{head}");
    // Still serving.
    assert!(s.get("/api/info")["events"].as_u64().unwrap() > 500);
}

const CAPTURE_ERRORS: &str = r#"
window.__errs = [];
(() => {
  const orig = console.error;
  console.error = function (...a) { window.__errs.push('console.error: ' + a.join(' ')); orig.apply(console, a); };
  window.addEventListener('error', (e) => window.__errs.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)))), true);
  window.addEventListener('unhandledrejection', (e) => window.__errs.push('rejection: ' + e.reason));
  document.addEventListener('securitypolicyviolation', (e) => window.__errs.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI));
})();
"#;

/// Wait until `cond` (a JS expression) is true in the page.
fn wait_for(b: &mut Browser, cond: &str) {
    let t0 = Instant::now();
    while b.eval(&format!("!!({cond})")) != json!(true) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out waiting for {cond}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A browser on the served page, errors captured (`window.__errs`), once `ready` holds.
fn open_page(s: &Served, tag: &str, ready: &str) -> Browser {
    let mut b = Browser::launch(tag);
    b.call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": CAPTURE_ERRORS }),
    );
    b.call("Page.navigate", json!({ "url": s.url("/") }));
    b.wait_event("Page.loadEventFired");
    wait_for(&mut b, ready);
    b
}

/// A synthetic trace (scenario, events) in a scratch directory named after `tag`, served,
/// and a browser on its page once `ready` holds: (directory, trace, server, browser); None
/// (the test skips) without a browser.
fn page_on(
    (scenario, events): (&str, u64),
    tag: &str,
    ready: &str,
) -> Option<(PathBuf, PathBuf, Served, Browser)> {
    if !browser_available() {
        return None;
    }
    let dir = tmpdir(tag);
    let trace = synth(&dir, scenario, events);
    let s = Served::start(&trace);
    let b = open_page(&s, tag, ready);
    Some((dir, trace, s, b))
}

/// Reload the page and wait until `ready` holds.
fn reload(b: &mut Browser, ready: &str) {
    b.call("Page.reload", json!({}));
    b.wait_event("Page.loadEventFired");
    wait_for(b, ready);
}

/// The page lists the waits of `api` (an `/api/waits` answer), in its order.
fn assert_waits_listed(b: &mut Browser, api: &Value) {
    assert_eq!(
        b.eval("explorer.waits.waits.map(w => [w.wait.tid, w.wait.time_s])"),
        json!(api["waits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| json!([w["wait"]["tid"], w["wait"]["time_s"]]))
            .collect::<Vec<_>>()),
    );
}

fn mouse(b: &mut Browser, kind: &str, xy: (f64, f64)) {
    mouse_mod(b, kind, xy, 0);
}

/// A mouse event with modifier keys (`8`: shift).
fn mouse_mod(b: &mut Browser, kind: &str, xy: (f64, f64), modifiers: u32) {
    b.call(
        "Input.dispatchMouseEvent",
        json!({"type": kind, "x": xy.0, "y": xy.1, "button": "left", "buttons": 1, "clickCount": 1, "modifiers": modifiers}),
    );
}

/// A real mouse drag on the heat map from cell `a` to cell `z` (`(column, row)`), with
/// shift held when `shift` (the baseline range); waits for the page to settle.
fn drag(b: &mut Browser, a: (u32, u32), z: (u32, u32), shift: bool) {
    let m = if shift { 8 } else { 0 };
    let a = xy(&b.eval(&format!("explorer.cellClientXY({}, {})", a.0, a.1)));
    let z = xy(&b.eval(&format!("explorer.cellClientXY({}, {})", z.0, z.1)));
    b.call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": a.0, "y": a.1, "modifiers": m}),
    );
    mouse_mod(b, "mousePressed", a, m);
    mouse_mod(b, "mouseMoved", ((a.0 + z.0) / 2.0, (a.1 + z.1) / 2.0), m);
    mouse_mod(b, "mouseMoved", z, m);
    mouse_mod(b, "mouseReleased", z, m);
    std::thread::sleep(Duration::from_millis(50));
    wait_for(b, "explorer.busy === 0");
}

/// The frames the page draws that weigh something themselves: path -> own ns.
fn drawn_lines(b: &mut Browser) -> BTreeMap<String, u64> {
    let drawn = b.eval("explorer.frames().filter(f => f.self > 0).map(f => [f.path, f.self])");
    let mut shown = BTreeMap::new();
    for p in drawn.as_array().unwrap() {
        *shown.entry(p[0].as_str().unwrap().to_string()).or_insert(0) += p[1].as_u64().unwrap();
    }
    shown
}

/// `lines` (the un-merged graph: `chains --window`'s) summed into the tree the page shows
/// (its frames narrower than a pixel merged by the server, `px=`): what the page must draw
/// if the merge is exact (`flat_tree::merge_into`).
fn as_drawn(b: &mut Browser, lines: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let tree = b.eval(
        "(() => { const c = explorer.chains; return c.rows ? {rows: c.rows, names: c.names, kinds: c.kinds} \
         : {nodes: c.nodes.map(n => ({name: n.name, parent: n.parent, value: n.value, self: n.self, kind: n.kind}))}; })()",
    );
    chainrec_testkit::flat_tree::merge_into(&tree, lines).unwrap()
}

/// The frame of `path` drawn on the graph's canvas, scrolled into view: its client
/// `[x, y, width]` (its row is 16 px high).
fn frame_on_screen(b: &mut Browser, path: &str) -> Value {
    let find = format!(
        "explorer.frames().find(f => f.path === {})",
        serde_json::to_string(path).unwrap()
    );
    b.eval(&format!(
        "(() => {{ let f = {find}; window.scrollBy(0, f.y - innerHeight / 2); f = {find}; return [f.x, f.y, f.w]; }})()"
    ))
}

/// A real mouse click on the frame of `path` (in the middle of what is drawn of it).
fn click_frame(b: &mut Browser, path: &str) {
    let r = frame_on_screen(b, path);
    let (x, y, w) = (
        r[0].as_f64().unwrap(),
        r[1].as_f64().unwrap(),
        r[2].as_f64().unwrap(),
    );
    b.click(x + (w - 1.0) / 2.0, y + 8.0);
}

/// Whether folded `line` passes through the frame whose path is `prefix`.
fn through(line: &str, prefix: &str) -> bool {
    line.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(';'))
}

fn xy(v: &Value) -> (f64, f64) {
    (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
}

fn dur_of(s: &Served) -> u64 {
    s.get("/api/info")["duration_ns"].as_u64().unwrap()
}

#[test]
fn serve_page_in_chromium() {
    if !browser_available() {
        return;
    }
    let dir = tmpdir("serve-browser");
    let trace = synth(&dir, "pipe-relay", 4000);
    let s = Served::start(&trace);
    let mut b = open_page(
        &s,
        "serve",
        "window.explorer && explorer.heat && explorer.waits && explorer.busy === 0",
    );

    // Issue 36 item 5: with no range in the URL the page opens on the whole trace (a small
    // one) and its longest waits, as /api/waits lists them for the root frame.
    let duration = s.get("/api/info")["duration_ns"].as_u64().unwrap();
    assert_eq!(b.eval("explorer.range"), json!({"from": 0, "to": duration}));
    let want = as_drawn(&mut b, &chains_window(&trace, 0, duration));
    assert_eq!(
        drawn_lines(&mut b),
        want,
        "the opening graph is not the whole trace's"
    );
    let longest = s.get(&format!("/api/waits?frame=&from=0&to={duration}&limit=10"));
    assert_waits_listed(&mut b, &longest);
    assert_eq!(
        b.eval("document.querySelectorAll('#waitlist .wait').length"),
        json!(longest["waits"].as_array().unwrap().len())
    );
    assert!(longest["waits"].as_array().unwrap().len() >= 3, "{longest}");
    let title = b.eval("document.getElementById('waitstitle').textContent");
    assert!(
        title
            .as_str()
            .unwrap_or("")
            .contains("longest (click a frame"),
        "{title}"
    );

    // Drag on the heat map from (second 1, row 10) to (second 2, row 25): the range from
    // that first cell's start to the last one's end.
    let heat = s.get("/api/heatmap");
    let (col0, bucket) = (
        heat["col0_ns"].as_i64().unwrap(),
        heat["bucket_ns"].as_i64().unwrap(),
    );
    let want_from = (col0 + 1_000_000_000 + 10 * bucket) as u64;
    let want_to = (col0 + 2_000_000_000 + 26 * bucket) as u64;
    drag(&mut b, (1, 10), (2, 25), false);
    wait_for(&mut b, "explorer.chains && explorer.busy === 0");
    let range = b.eval("explorer.range");
    assert_eq!(range, json!({"from": want_from, "to": want_to}));

    // The frames drawn are chains --window of that range: every path, every weight
    // (summed into the page's grey frames below a pixel, if any). The page asked for
    // its graph's width in pixels.
    let shown = drawn_lines(&mut b);
    let cli = chains_window(&trace, want_from, want_to);
    assert!(cli.len() >= 3, "{cli:?}");
    let range_lines = as_drawn(&mut b, &cli);
    assert_eq!(
        shown, range_lines,
        "the page's frames differ from chains --window"
    );
    let n_divs = b.eval("explorer.frames().length");
    let px = b.eval("explorer.chains.px");
    assert_eq!(px, b.eval("document.getElementById('flame').clientWidth"));
    let frames = s.get(&format!(
        "/api/chains?from={want_from}&to={want_to}&px={px}"
    ))["frames"]
        .clone();
    assert_eq!(n_divs, frames, "every frame drawn");
    let shot = dir.join("serve-range.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!("screenshot after selecting the range: {}", shot.display());

    // Click a narrow frame of a waker level (the widest one not already full width): it
    // zooms to full width, and the waits through it are listed, heaviest first, as
    // /api/waits says.
    let full = b
        .eval("document.getElementById('flame').clientWidth")
        .as_f64()
        .unwrap();
    let pick = b.eval(&format!(
        "(() => {{ let best = null; for (const f of explorer.frames()) {{ const w = f.w; if (f.path.includes(';--;') && w >= 3 && w < {full} - 5 && (!best || w > best.w)) best = {{path: f.path, w}}; }} return best; }})()"
    ));
    let path = pick["path"]
        .as_str()
        .expect("a narrow waker-level frame")
        .to_string();
    let before = frame_on_screen(&mut b, &path);
    let (x, y, w) = (
        before[0].as_f64().unwrap(),
        before[1].as_f64().unwrap(),
        before[2].as_f64().unwrap(),
    );
    b.click(x + w / 2.0, y + 8.0);
    wait_for(&mut b, "explorer.waits && explorer.busy === 0");
    assert_eq!(b.eval("explorer.zoom.join(';')"), json!(path));
    let after = frame_on_screen(&mut b, &path);
    assert!(
        after[2].as_f64().unwrap() >= full - 1.0,
        "{path} zoomed: {after}"
    );
    let q = path.replace(';', "%3B");
    let api = s.get(&format!(
        "/api/waits?frame={q}&from={want_from}&to={want_to}&limit=10"
    ));
    let first = &api["waits"][0];
    assert!(first.is_object(), "{api}");
    let shown_first = b.eval(
        "(() => { const w = document.querySelector('#waitlist .wait'); return [w.dataset.tid, w.dataset.through, w.innerText]; })()",
    );
    assert_eq!(shown_first[0], json!(first["wait"]["tid"].to_string()));
    assert_eq!(shown_first[1], json!(first["through_ns"].to_string()));
    let text = shown_first[2].as_str().unwrap();
    eprintln!("the first wait's card:\n{text}");
    let root = path.split(';').next().unwrap();
    assert!(text.starts_with(&format!("{root} (tid ")), "{text}");
    assert!(text.contains("level 1: "), "{text}");
    // Issue 36: every part of the wait is on its card, level by level: the run-queue time
    // behind whom (level 0's and each waker level's) and the wakers' on-CPU time.
    let mut heaviest: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for p in first["wait"]["runq"].as_array().unwrap() {
        let (level, ns) = (p["level"].as_u64().unwrap(), p["ns"].as_u64().unwrap());
        if heaviest.get(&level).is_none_or(|h| ns > h.0) {
            heaviest.insert(level, (ns, p["holder"].as_str().unwrap().to_string()));
        }
    }
    for (level, (ns, holder)) in &heaviest {
        let part = format!("{holder} {}", fmt_ns_like_page(*ns));
        assert!(
            text.contains(&part),
            "level {level}: {part} missing from the card: {text}"
        );
    }
    if let Some(oncpu) = first["wait"]["oncpu"].as_array() {
        assert!(!oncpu.is_empty() && text.contains("on CPU "), "{text}");
    }
    assert_eq!(
        b.eval("document.querySelectorAll('#waitlist .wait').length"),
        json!(api["waits"].as_array().unwrap().len())
    );

    // Issue 36: the page's state is in its URL: a reload opens the same range, zoom and
    // waits; Esc leaves the zoom (and the URL says so).
    let hash = b.eval("location.hash");
    let h = hash.as_str().unwrap();
    assert!(
        h.contains(&format!("from={want_from}&to={want_to}")) && h.contains("&frame="),
        "{h}"
    );
    reload(
        &mut b,
        "window.explorer && explorer.waits && explorer.busy === 0",
    );
    assert_eq!(
        b.eval("explorer.range"),
        json!({"from": want_from, "to": want_to})
    );
    assert_eq!(b.eval("explorer.zoom.join(';')"), json!(path));
    assert_eq!(
        b.eval("document.querySelector('#waitlist .wait').dataset.tid"),
        json!(first["wait"]["tid"].to_string())
    );
    b.eval("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))");
    assert_eq!(b.eval("explorer.zoom.length"), json!(0));
    assert!(!b.eval("location.hash").as_str().unwrap().contains("frame="));
    b.eval(&format!(
        "(() => {{ explorer.zoom = {}.split(';'); }})()",
        serde_json::to_string(&path).unwrap()
    ));

    // Search: the matching frames turn magenta and their share is shown.
    b.eval("(() => { const s = document.getElementById('search'); s.value = 'hrtimer'; s.dispatchEvent(new Event('input')); })()");
    let matched = b.eval("explorer.frames().filter(f => f.match).length");
    assert!(matched.as_u64().unwrap() >= 1, "{matched}");
    let label = b.eval("document.getElementById('matched').textContent");
    assert!(label.as_str().unwrap().starts_with("matched "), "{label}");
    let shot = dir.join("serve-zoom.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!("screenshot after the click and search: {}", shot.display());

    // The first wait's critical path around it: /api/critpath of the thread from its
    // switch-out minus the margin to its switch-in plus it, drawn as a bar of segments
    // (the wait outlined) and listed.
    let w0 = first["wait"].clone();
    b.eval("(() => { const d = document.querySelector('#waitlist .wait'); d.scrollIntoView(); d.querySelector('.cpbtn').click(); })()");
    wait_for(&mut b, "explorer.critpath && explorer.busy === 0");
    let cp = b.eval("explorer.critpath");
    let (out, inn) = (
        w0["switch_out_ns"].as_u64().unwrap(),
        w0["switch_in_ns"].as_u64().unwrap(),
    );
    let start = s.get("/api/info")["start_ns"].as_u64().unwrap();
    let margin = ((inn - out) / 2).clamp(1_000_000, 1_000_000_000);
    assert_eq!(cp["tid"], w0["tid"]);
    assert_eq!(
        cp["from"].as_u64().unwrap(),
        (out - start).saturating_sub(margin)
    );
    assert_eq!(
        cp["to"].as_u64().unwrap(),
        (inn - start + margin).min(dur_of(&s))
    );
    let api_cp = s.get(&format!(
        "/api/critpath?tid={}&from={}&to={}",
        w0["tid"], cp["from"], cp["to"]
    ));
    assert_eq!(cp["data"], api_cp);
    let segs = api_cp["segments"].as_array().unwrap();
    let bar = b
        .eval("[...document.querySelectorAll('#waitlist .wait .cpbar div')].map(d => d.className)");
    let kinds: Vec<Value> = segs.iter().map(|s| s["kind"].clone()).collect();
    let drawn_kinds: Vec<Value> = bar
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!(c.as_str().unwrap().split(' ').next().unwrap()))
        .collect();
    assert_eq!(drawn_kinds, kinds);
    // The outlined segment is the wait: blocked from its switch-out, behind the same
    // first waker as the wait's level 1.
    let the_wait: Vec<&Value> = segs
        .iter()
        .filter(|s| s["start_ns"].as_u64() == Some(out))
        .collect();
    assert_eq!(the_wait.len(), 1, "{api_cp}");
    assert_eq!(the_wait[0]["kind"], "blocked");
    assert_eq!(
        the_wait[0]["levels"][0]["tid"], w0["hops"][0]["waker_tid"],
        "{api_cp}"
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#waitlist .wait .cpbar .thewait').length"),
        json!(1)
    );
    let cp_text = b.eval("document.querySelector('#waitlist .wait .cp').innerText");
    let cp_text = cp_text.as_str().unwrap();
    assert!(cp_text.contains("critical path of "), "{cp_text}");
    assert!(cp_text.contains(" blocked "), "{cp_text}");
    let shot = dir.join("serve-critpath.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!("screenshot of a wait's critical path: {}", shot.display());

    // The differential view: shift-click a baseline (second 4, the last, cut by the
    // trace's end: pipe-relay's 10 ms period makes every whole-bucket range's time per
    // second the same, the cut one differs). Each drawn
    // frame's baseline value is the baseline range's chains --window time through that
    // path; red where its time per second grew, blue where it shrank.
    b.eval("(() => { const s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input')); window.scrollTo(0, 0); })()");
    let base_from = (col0 + 4_000_000_000).max(0) as u64;
    let base_to = ((col0 + 5_000_000_000) as u64).min(dur_of(&s));
    assert!(
        base_to < (col0 + 5_000_000_000) as u64,
        "the trace ends in second 4"
    );
    drag(&mut b, (4, 10), (4, 10), true);
    wait_for(&mut b, "explorer.chains.base && explorer.busy === 0");
    assert_eq!(
        b.eval("explorer.base"),
        json!({"from": base_from, "to": base_to})
    );
    assert_eq!(
        b.eval("explorer.range"),
        json!({"from": want_from, "to": want_to})
    );
    let base_cli = chains_window(&trace, base_from, base_to);
    let frames = b.eval(
        "explorer.frames().filter(f => !f.root).map(f => [f.path, f.value, f.base, f.fill, f.delta])",
    );
    let (span, bspan) = ((want_to - want_from) as f64, (base_to - base_from) as f64);
    let (mut grew, mut shrank) = (0, 0);
    let drawn_paths: std::collections::BTreeSet<&str> = frames
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[0].as_str().unwrap())
        .collect();
    for f in frames.as_array().unwrap() {
        let path = f[0].as_str().unwrap();
        let (parent, name) = path.rsplit_once(';').unwrap_or(("", path));
        let want: u64 = if name.ends_with(" below a pixel]") {
            // A remainder: the baseline's time through the selection's frames it merged
            // (the children of its parent in the selection's lines not drawn).
            let under = |l: &str| -> Option<String> {
                let rest = if parent.is_empty() {
                    l
                } else {
                    l.strip_prefix(parent)?.strip_prefix(';')?
                };
                Some(rest.split(';').next()?.to_string())
            };
            let merged: std::collections::BTreeSet<String> = cli
                .keys()
                .filter_map(|l| under(l))
                .filter(|c| {
                    let p = if parent.is_empty() {
                        c.clone()
                    } else {
                        format!("{parent};{c}")
                    };
                    !drawn_paths.contains(p.as_str())
                })
                .collect();
            base_cli
                .iter()
                .filter(|(l, _)| under(l).is_some_and(|c| merged.contains(&c)))
                .map(|(_, w)| w)
                .sum()
        } else {
            base_cli
                .iter()
                .filter(|(l, _)| through(l, path))
                .map(|(_, w)| w)
                .sum()
        };
        assert_eq!(f[2].as_u64().unwrap(), want, "baseline value of {path}");
        // ns per second of range, as the page computes it (its sign picks the colour).
        let delta = f[4].as_f64().unwrap();
        let mine = (f[1].as_f64().unwrap() / span - want as f64 / bspan) * 1e9;
        assert!(
            (delta - mine).abs() <= 1e-6 * (1.0 + mine.abs()),
            "{path}: delta {delta} vs {mine}"
        );
        let rgb: Vec<u32> = f[3]
            .as_str()
            .unwrap()
            .trim_start_matches("rgb(")
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.trim().parse().unwrap())
            .collect();
        if delta > 0.0 {
            assert!(rgb[0] == 255 && rgb[2] < 255, "{path} grew: {rgb:?}");
            grew += 1;
        } else if delta < 0.0 {
            assert!(rgb[2] == 255 && rgb[0] < 255, "{path} shrank: {rgb:?}");
            shrank += 1;
        }
    }
    assert!(grew + shrank > 0, "some frame changed");
    // Issue 36: the root is shaded by its own relative change, not saturated by the sum of
    // every frame's change.
    let root = b.eval(
        "(() => { const f = explorer.frames().find(f => f.root); const c = explorer.chains; \
         return [c.nodes[0].value, c.base.values[0], f.fill]; })()",
    );
    let (now, then) = (
        root[0].as_f64().unwrap() / span,
        root[1].as_f64().unwrap() / bspan,
    );
    let k = ((now - then).abs() / now.max(then)).min(1.0);
    let v = (235.0 * (1.0 - k)).round() as u32;
    let want = if now > then {
        format!("rgb(255,{v},{v})")
    } else if now < then {
        format!("rgb({v},{v},255)")
    } else {
        "rgb(235,235,235)".to_string()
    };
    assert_eq!(root[2].as_str().unwrap(), want, "root: {root}");
    let legend = b.eval("document.getElementById('baseinfo').innerText");
    assert!(legend.as_str().unwrap().contains("red grew"), "{legend}");
    let shot = dir.join("serve-diff.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!(
        "screenshot of the differential view ({grew} frames grew, {shrank} shrank): {}",
        shot.display()
    );
    // Clearing the baseline gives back the plain graph.
    b.eval("document.getElementById('nobase').click()");
    wait_for(&mut b, "!explorer.chains.base && explorer.busy === 0");
    assert_eq!(drawn_lines(&mut b), range_lines);

    assert_eq!(b.eval("window.__errs"), json!([]), "console errors");
    assert_eq!(
        b.eval("explorer.errors"),
        json!([]),
        "errors shown on the page"
    );
}

/// Issue 36 items 3 and 4, in chromium: after a graph has made the page scroll (its
/// scrollbar used to narrow the canvas, and the redraw on mousedown then moved its rows
/// under the mouse), a column click selects exactly that second and a drag exactly its
/// cells; the column's axis label is the range's start, both in seconds from the trace
/// start (the one time base). Then, from another origin (`localhost` vs `127.0.0.1`), the
/// browser's requests to the API are refused: no range is computed for that page.
#[test]
fn heat_map_selects_exact_seconds_after_the_page_scrolled() {
    if !browser_available() {
        return;
    }
    let dir = tmpdir("serve-scrolled");
    // A wall clock that puts the trace start 0.83 s into its first whole second.
    let trace = dir.join("pipe-relay-offset.zst");
    let params = chainrec_format::synth::SynthParams {
        events: 4000,
        ..Default::default()
    };
    chainrec_format::synth::write_trace_as(&trace, "pipe-relay", &params, vec![], |m| {
        m.clock_offset_ns = 1_795_000_000_830_000_000
    })
    .unwrap();
    let s = Served::start(&trace);
    let dur = dur_of(&s);
    let heat = s.get("/api/heatmap");
    let (col0, bucket) = (
        heat["col0_ns"].as_i64().unwrap(),
        heat["bucket_ns"].as_i64().unwrap(),
    );
    assert_eq!(col0, -830_000_000, "the trace starts 0.83 s into column 0");
    let mut b = Browser::launch("serve-scrolled");
    b.call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": CAPTURE_ERRORS }),
    );
    // Issue 36 item 5, a big trace: the page opens on its heaviest second (this one counts
    // as big for the page) and that second's longest waits.
    b.call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": "window.CHAINREC_OPEN_WHOLE_MAX = 100;" }),
    );
    b.call("Page.navigate", json!({ "url": s.url("/") }));
    b.wait_event("Page.loadEventFired");
    wait_for(
        &mut b,
        "window.explorer && explorer.heat && explorer.waits && explorer.busy === 0",
    );
    let sums: Vec<u64> = heat["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .sum()
        })
        .collect();
    let heaviest = (0..sums.len())
        .max_by_key(|&i| (sums[i], std::cmp::Reverse(i)))
        .unwrap() as i64;
    let want = json!({
        "from": (col0 + heaviest * 1_000_000_000).max(0),
        "to": (col0 + (heaviest + 1) * 1_000_000_000).min(dur as i64),
    });
    assert_eq!(b.eval("explorer.range"), want, "column sums {sums:?}");
    let status = b.eval("document.getElementById('status').textContent");
    assert!(
        status.as_str().unwrap_or("").contains("heaviest second"),
        "{status}"
    );
    assert!(b.eval("explorer.waits.waits.length").as_u64().unwrap() > 0);
    // A graph, then the waits through a frame: the page scrolls.
    b.eval("document.getElementById('whole').click()");
    wait_for(&mut b, "explorer.chains && explorer.busy === 0");
    let first = b.eval("explorer.frames().find(f => !f.root && f.w >= 1).path");
    click_frame(&mut b, first.as_str().unwrap());
    wait_for(&mut b, "explorer.waits && explorer.busy === 0");
    assert_eq!(
        b.eval("document.documentElement.scrollHeight > innerHeight + 50"),
        json!(true),
        "the page scrolls"
    );
    b.eval("window.scrollTo(0, 25)");
    std::thread::sleep(Duration::from_millis(100));

    // A click on column 2: its whole second, from the trace start.
    let at = xy(&b.eval("explorer.cellClientXY(2, 25)"));
    mouse(&mut b, "mousePressed", at);
    mouse(&mut b, "mouseReleased", at);
    std::thread::sleep(Duration::from_millis(50));
    wait_for(&mut b, "explorer.busy === 0");
    let (from, to) = ((col0 + 2_000_000_000) as u64, (col0 + 3_000_000_000) as u64);
    assert!(to <= dur, "second 2 is inside the trace");
    assert_eq!(
        b.eval("explorer.range"),
        json!({"from": from, "to": to}),
        "a column click selects its second"
    );
    let label = b.eval("document.getElementById('range').textContent");
    let want = format!("{:.3} .. {:.3} s", from as f64 / 1e9, to as f64 / 1e9);
    assert_eq!(label, json!(want));
    // One time base: the column's axis label is where the range starts.
    let axis = b.eval("explorer.axis");
    let tick = axis
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["col"] == 2)
        .unwrap_or_else(|| panic!("column 2 labelled: {axis}"));
    let secs: f64 = tick["text"]
        .as_str()
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!(
        (secs - from as f64 / 1e9).abs() < 0.0051,
        "column 2 labelled {tick} but selects {want}"
    );
    // Column 0's label is the trace start (0), where its range starts too.
    let zero = &axis[0];
    assert_eq!(
        (zero["col"].clone(), zero["text"].clone()),
        (json!(0), json!("0s"))
    );
    let info = b.eval("document.getElementById('heatinfo').textContent");
    assert!(
        info.as_str()
            .unwrap()
            .contains("seconds from the trace start"),
        "{info}"
    );

    // A drag from (second 1, row 10) to (second 3, row 40): exactly those cells.
    drag(&mut b, (1, 10), (3, 40), false);
    let want_from = (col0 + 1_000_000_000 + 10 * bucket) as u64;
    let want_to = (col0 + 3_000_000_000 + 41 * bucket) as u64;
    assert_eq!(
        b.eval("explorer.range"),
        json!({"from": want_from, "to": want_to}),
        "a drag selects its cells"
    );
    wait_for(&mut b, "explorer.chains && explorer.busy === 0");
    let want = as_drawn(&mut b, &chains_window(&trace, want_from, want_to));
    assert_eq!(drawn_lines(&mut b), want);
    let shot = dir.join("serve-scrolled.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!(
        "screenshot after the drag on the scrolled page: {}",
        shot.display()
    );
    assert_eq!(b.eval("window.__errs"), json!([]), "console errors");
    assert_eq!(
        b.eval("explorer.errors"),
        json!([]),
        "errors shown on the page"
    );

    // Another origin: the page at localhost asks 127.0.0.1's API (cross-site): refused
    // before any engine run; its own API (same origin) is answered.
    let port = s.host.rsplit(':').next().unwrap().to_string();
    let other = format!("http://localhost:{port}/");
    b.call("Page.navigate", json!({ "url": other }));
    b.wait_event("Page.loadEventFired");
    wait_for(
        &mut b,
        "window.explorer && explorer.heat && explorer.busy === 0",
    );
    let runs = |s: &Served| {
        let r = &s.get("/api/info")["ranges"];
        r["resumed"].as_u64().unwrap() + r["from_start"].as_u64().unwrap()
    };
    let before = runs(&s);
    let probe = |b: &mut Browser, url: &str| {
        b.eval(&format!(
            "fetch({url:?}, {{mode: 'no-cors'}}).then(r => (window.__probe = r.type + ' ' + r.status), e => (window.__probe = 'failed ' + e))"
        ));
        wait_for(b, "window.__probe");
        let p = b.eval("window.__probe");
        b.eval("delete window.__probe");
        p
    };
    let p = probe(
        &mut b,
        &format!("http://{}/api/chains?from=0&to={dur}", s.host),
    );
    assert_eq!(runs(&s), before, "a cross-site request ran a range ({p})");
    let p = probe(&mut b, &format!("{other}api/chains?from=0&to={dur}"));
    assert_eq!(p, json!("basic 200"));
    assert_eq!(runs(&s), before + 1, "the page's own request is answered");
}

/// `chainrec report`'s file opened from disk (file://): nothing fetched (its CSP forbids
/// it, and no resource is loaded), no console error; at load it shows the whole trace's
/// graph, and picking a precomputed range from the list shows exactly `chains --window`
/// of that range.
#[test]
fn static_report_opens_from_disk() {
    if !browser_available() {
        return;
    }
    let dir = tmpdir("serve-report");
    let trace = synth(&dir, "pipe-relay", 4000);
    let html = dir.join("report.html");
    let o = bin()
        .args(["report", "-q", "--ranges", "3", "-o"])
        .arg(&html)
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(!text.contains("src=\"app.js\""), "the script is inlined");
    assert!(!text.contains("href=\"app.css\""), "the style is inlined");
    let mut b = Browser::launch("report");
    b.call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": CAPTURE_ERRORS }),
    );
    b.call(
        "Page.navigate",
        json!({ "url": format!("file://{}", html.display()) }),
    );
    b.wait_event("Page.loadEventFired");
    wait_for(
        &mut b,
        "window.explorer && explorer.heat && explorer.chains && explorer.busy === 0",
    );
    let dur = b.eval("explorer.info.duration_ns").as_u64().unwrap();
    assert_eq!(b.eval("explorer.range"), json!({"from": 0, "to": dur}));
    let whole = as_drawn(&mut b, &chains_window(&trace, 0, dur));
    assert_eq!(drawn_lines(&mut b), whole, "the whole trace at load");
    let ranges = b.eval("explorer.static.ranges.map(r => [r.from_ns, r.to_ns])");
    let ranges = ranges.as_array().unwrap();
    assert_eq!(
        ranges.len(),
        4,
        "whole trace + 3 heaviest seconds: {ranges:?}"
    );
    let banner = b.eval("document.getElementById('static').innerText");
    assert!(
        banner
            .as_str()
            .unwrap()
            .contains("It cannot compute other ranges"),
        "{banner}"
    );
    let (from, to) = (
        ranges[2][0].as_u64().unwrap(),
        ranges[2][1].as_u64().unwrap(),
    );
    b.eval("(() => { const s = document.getElementById('ranges'); s.value = '2'; s.dispatchEvent(new Event('change')); })()");
    wait_for(
        &mut b,
        &format!("explorer.range.from === {from} && explorer.busy === 0"),
    );
    let shown = drawn_lines(&mut b);
    let cli = chains_window(&trace, from, to);
    assert!(cli.len() >= 3, "{cli:?}");
    assert_eq!(
        shown,
        as_drawn(&mut b, &cli),
        "the precomputed range's graph"
    );
    assert_ne!(shown, whole, "the graph changed");
    // Nothing but the file itself was loaded.
    assert_eq!(
        b.eval("performance.getEntriesByType('resource').length"),
        json!(0)
    );
    let shot = dir.join("report-range.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!(
        "screenshot of report.html with a precomputed range: {}",
        shot.display()
    );
    assert_eq!(b.eval("window.__errs"), json!([]), "console errors");
    assert_eq!(
        b.eval("explorer.errors"),
        json!([]),
        "errors shown on the page"
    );
}

/// On a real recording served: a real drag over the heaviest second of the heat map
/// (offset rows 5 to 44) shows exactly `chains --window` of that range.
fn browser_range_on_real_trace(trace: &Path, dir: &Path, tag: &str) {
    let s = Served::start(trace);
    let heat = s.get("/api/heatmap");
    let cells = heat["cells"].as_array().unwrap();
    let col = (0..cells.len())
        .max_by_key(|&c| {
            cells[c]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .sum::<u64>()
        })
        .unwrap() as u32;
    let (col0, bucket) = (
        heat["col0_ns"].as_i64().unwrap(),
        heat["bucket_ns"].as_i64().unwrap(),
    );
    let dur = dur_of(&s) as i64;
    let from = (col0 + col as i64 * 1_000_000_000 + 5 * bucket).clamp(0, dur) as u64;
    let to = (col0 + col as i64 * 1_000_000_000 + 45 * bucket).clamp(0, dur) as u64;
    let mut b = open_page(
        &s,
        tag,
        "window.explorer && explorer.heat && explorer.busy === 0",
    );
    // Issue 36: the colour scale separates the cells of a real trace: the distinct cell
    // values between their 10th and 90th percentile span at least 80 % of it (the old log
    // scale of the value put nearly all at its dark end), and a legend says so. (Cells
    // with equal values share a colour: threads asleep for a whole row make many cells
    // exactly equal, so the same measure over cells rather than values can be smaller.)
    let span = b.eval(
        "(() => { const s = explorer.heatRanks; const at = (q) => s[Math.round(q * (s.length - 1))]; \
         const log = (v) => Math.log1p(v) / Math.log1p(explorer.heat.max); \
         const cells = explorer.heat.cells.flat().filter((v) => v > 0).sort((a, b) => a - b); \
         const c = (q) => cells[Math.round(q * (cells.length - 1))]; \
         return [s.length, explorer.intensity(at(0.9)) - explorer.intensity(at(0.1)), \
           log(at(0.9)) - log(at(0.1)), cells.length, explorer.intensity(c(0.9)) - explorer.intensity(c(0.1)), \
           log(c(0.9)) - log(c(0.1))]; })()",
    );
    eprintln!(
        "{tag}: heat map: distinct values, their p10..p90 colour span, the log scale's; \
         cells, their span, the log scale's: {span}"
    );
    assert!(span[0].as_u64().unwrap() >= 10, "{tag}: {span}");
    assert!(span[1].as_f64().unwrap() >= 0.8, "{tag}: {span}");
    let legend = b.eval("document.getElementById('heatlegend').textContent");
    assert!(
        legend
            .as_str()
            .unwrap()
            .starts_with("colour by percentile among the "),
        "{tag}: {legend}"
    );
    drag(&mut b, (col, 5), (col, 44), false);
    wait_for(&mut b, "explorer.chains && explorer.busy === 0");
    assert_eq!(b.eval("explorer.range"), json!({"from": from, "to": to}));
    let shown = drawn_lines(&mut b);
    let cli = chains_window(trace, from, to);
    assert!(cli.len() >= 3, "{tag}: {cli:?}");
    // The page's graph is merged below a pixel, never pruned: every line is there.
    assert_eq!(b.eval("explorer.chains.pruned_frames"), json!(0));
    assert_eq!(
        shown,
        as_drawn(&mut b, &cli),
        "{tag}: the page's frames differ from chains --window"
    );
    let shot = dir.join(format!("{tag}.png"));
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!(
        "{tag}: {} lines equal chains --window; screenshot {}",
        shown.len(),
        shot.display()
    );
    assert_eq!(b.eval("window.__errs"), json!([]), "console errors");
    assert_eq!(
        b.eval("explorer.errors"),
        json!([]),
        "errors shown on the page"
    );
}

/// The done criteria of issue 26 on real recordings (root: BPF): `chainrec demo`'s trace,
/// and a `tar c /usr/share/doc | gzip > /dev/null` pipeline recorded for 2 s.
#[test]
fn real_serve_demo_and_tar_gzip() {
    use chainrec_testkit::bpf::can_record;
    if !can_record("real_serve_demo_and_tar_gzip") || !browser_available() {
        return;
    }
    let dir = tmpdir("serve-real");
    let demo = dir.join("demo");
    let o = bin()
        .args(["demo", "--duration", "2", "-o"])
        .arg(&demo)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    browser_range_on_real_trace(&demo.join("trace.zst"), &dir, "serve-real-demo");

    let tar_dir = dir.join("tar");
    std::fs::create_dir_all(&tar_dir).unwrap();
    let (trace, status) =
        common::record_while(&tar_dir, chainrec_record::RecordOptions::default(), || {
            std::process::Command::new("timeout")
                .args(["2", "sh", "-c", "tar c /usr/share/doc | gzip > /dev/null"])
                .status()
                .unwrap()
        });
    // 124: timeout stopped it (the pipeline still ran); 0: it finished within 2 s.
    assert!(matches!(status.code(), Some(0 | 124)), "{status:?}");
    let o = bin()
        .args(["chains", "--unit", "ns"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l.starts_with("gzip;") || l.starts_with("tar;")),
        "the pipeline's waits are in the trace"
    );
    browser_range_on_real_trace(&trace, &dir, "serve-real-tar-gzip");
}

/// Issue 36 item 5: the header's thread filter applies to everything on the page. In
/// chromium, on pipe-relay's whole-trace view: typing a comm regex redraws the graph as
/// `chains --window --comm` of the range draws it (its roots all match: the relay's waits,
/// which dedup hides without a filter), lists the waits `/api/waits` gives with the same
/// filter (all of matching threads), puts the filter in
/// the URL, and a reload opens with it.
#[test]
fn header_filters_apply_to_the_graph_and_the_waits() {
    let Some((_dir, trace, s, mut b)) = page_on(
        ("pipe-relay", 4000),
        "serve-filters",
        "window.explorer && explorer.heat && explorer.waits && explorer.busy === 0",
    ) else {
        return;
    };
    let duration = dur_of(&s);
    let unfiltered = chains_window(&trace, 0, duration);
    b.eval(
        "(() => { const c = document.getElementById('comm'); c.value = '^cr-relay$'; \
         c.dispatchEvent(new Event('change')); return true; })()",
    );
    wait_for(
        &mut b,
        "explorer.busy === 0 && explorer.waits && location.hash.includes('comm=')",
    );
    let want = chains_window_with(&trace, 0, duration, &["--comm", "^cr-relay$"]);
    assert!(
        !want.is_empty() && want.len() < unfiltered.len(),
        "{want:?}"
    );
    assert!(want.keys().all(|l| l.starts_with("cr-relay;")), "{want:?}");
    let want = as_drawn(&mut b, &want);
    assert_eq!(drawn_lines(&mut b), want, "the filtered graph");
    let waits = s.get(&format!(
        "/api/waits?frame=&from=0&to={duration}&limit=10&comm=%5Ecr-relay%24"
    ));
    assert_waits_listed(&mut b, &waits);
    assert_eq!(
        b.eval("explorer.waits.waits.every(w => w.wait.comm === 'cr-relay')"),
        json!(true)
    );
    // A reload opens with the filter from the URL.
    reload(
        &mut b,
        "window.explorer && explorer.chains && explorer.waits && explorer.busy === 0",
    );
    assert_eq!(
        b.eval("document.getElementById('comm').value"),
        json!("^cr-relay$")
    );
    assert_eq!(
        drawn_lines(&mut b),
        want,
        "the filtered graph after a reload"
    );
    assert_eq!(b.eval("window.__errs"), json!([]));
}

/// The heat-map column at the middle of its scrolled view (46 and 8 px: the margins).
const MID_COLUMN: &str = "(() => { const box = document.getElementById('heatscroll'), \
    c = document.getElementById('heatmap'); \
    return (box.scrollLeft + box.clientWidth / 2 - 46) / (c.clientWidth - 54) * explorer.heat.columns; })()";

/// Issue 36 item 3: a long trace's heat map scrolls sideways instead of squeezing its
/// seconds under a pixel. In chromium, on a ~600 s pipe-relay trace: each second gets at
/// least 4 px (the canvas wider than its box, which scrolls), a click on a column near the
/// end after scrolling there selects exactly that second, and the zoom select sets the
/// width per second (16 px: 16 px per column).
#[test]
fn a_long_trace_scrolls_and_zooms() {
    if !browser_available() {
        return;
    }
    let dir = tmpdir("serve-long");
    let trace = synth(&dir, "pipe-relay", 550_000);
    let s = Served::start(&trace);
    let dur = dur_of(&s);
    assert!(dur > 500_000_000_000, "{dur} ns: not a long trace");
    let heat = s.get("/api/heatmap");
    let col0 = heat["col0_ns"].as_i64().unwrap();
    let columns = heat["columns"].as_u64().unwrap();
    let mut b = open_page(
        &s,
        "serve-long",
        "window.explorer && explorer.heat && explorer.waits && explorer.busy === 0",
    );
    let widths = b.eval(
        "(() => { const c = document.getElementById('heatmap'), \
         box = document.getElementById('heatscroll'); \
         return [c.clientWidth, c.width, box.clientWidth, box.scrollWidth]; })()",
    );
    let [css_w, canvas_w, box_w, scroll_w] = [0, 1, 2, 3].map(|i| widths[i].as_u64().unwrap());
    assert!(
        css_w >= columns * 4 && canvas_w == css_w,
        "{columns} columns drawn {css_w} px wide ({canvas_w} canvas px): {widths}"
    );
    assert!(scroll_w > box_w, "the heat map does not scroll: {widths}");
    // Scroll to the end; a click on the third column from the end.
    b.eval("(() => { const box = document.getElementById('heatscroll'); box.scrollLeft = box.scrollWidth; return true; })()");
    std::thread::sleep(Duration::from_millis(100));
    let col = columns - 3;
    let at = xy(&b.eval(&format!("explorer.cellClientXY({col}, 20)")));
    let vw = b.eval("innerWidth").as_f64().unwrap();
    assert!(
        at.0 > 0.0 && at.0 < vw,
        "column {col} at x {} is not in view ({vw})",
        at.0
    );
    mouse(&mut b, "mousePressed", at);
    mouse(&mut b, "mouseReleased", at);
    std::thread::sleep(Duration::from_millis(50));
    wait_for(&mut b, "explorer.chains && explorer.busy === 0");
    let from = (col0 + col as i64 * 1_000_000_000).max(0) as u64;
    let to = ((col0 + (col as i64 + 1) * 1_000_000_000) as u64).min(dur);
    assert_eq!(
        b.eval("explorer.range"),
        json!({"from": from, "to": to}),
        "a click on column {col} after scrolling selects its second"
    );
    let want = as_drawn(&mut b, &chains_window(&trace, from, to));
    assert_eq!(drawn_lines(&mut b), want);
    // Zoom: 16 px per second.
    let mid_before = b.eval(MID_COLUMN).as_f64().unwrap();
    b.eval("(() => { const z = document.getElementById('heatzoom'); z.value = '16'; z.dispatchEvent(new Event('change')); return true; })()");
    std::thread::sleep(Duration::from_millis(100));
    let zoomed = b
        .eval("document.getElementById('heatmap').clientWidth")
        .as_u64()
        .unwrap();
    assert_eq!(
        zoomed,
        46 + 8 + columns * 16,
        "16 px per column and the margins"
    );
    // The second in the middle of the view stays there.
    let mid_after = b.eval(MID_COLUMN).as_f64().unwrap();
    assert!(
        (mid_after - mid_before).abs() <= 1.0,
        "the zoom moved the view: column {mid_before} was in the middle, now {mid_after}"
    );
    let shot = dir.join("serve-long.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!("screenshot of the zoomed long trace: {}", shot.display());
    assert_eq!(b.eval("window.__errs"), json!([]), "console errors");
}

/// Issue 36 item 5, "group by process": in chromium, on pipe-relay's whole-trace view, the
/// header's checkbox redraws the graph as `chains --window --process-frames` draws it
/// (every root a `[process: …]` frame), the waits list is `/api/waits?group=process`'s for
/// the root, and the URL keeps the grouping through a reload.
#[test]
fn group_by_process_in_the_page() {
    if !browser_available() {
        return;
    }
    let dir = tmpdir("serve-group");
    let trace = synth(&dir, "pipe-relay", 4000);
    let s = Served::start(&trace);
    let mut b = open_page(
        &s,
        "serve-group",
        "window.explorer && explorer.heat && explorer.waits && explorer.busy === 0",
    );
    let duration = dur_of(&s);
    b.eval(
        "(() => { const c = document.getElementById('byprocess'); c.checked = true; \
         c.dispatchEvent(new Event('change')); return true; })()",
    );
    wait_for(
        &mut b,
        "explorer.busy === 0 && explorer.waits && location.hash.includes('group=process')",
    );
    let want = chains_window_with(&trace, 0, duration, &["--process-frames"]);
    assert!(!want.is_empty());
    assert!(want.keys().all(|l| l.starts_with("[process: ")), "{want:?}");
    let want = as_drawn(&mut b, &want);
    assert_eq!(drawn_lines(&mut b), want, "the grouped graph");
    let waits = s.get(&format!(
        "/api/waits?frame=&from=0&to={duration}&limit=10&group=process"
    ));
    assert_waits_listed(&mut b, &waits);
    reload(
        &mut b,
        "window.explorer && explorer.chains && explorer.waits && explorer.busy === 0",
    );
    assert_eq!(
        b.eval("document.getElementById('byprocess').checked"),
        json!(true)
    );
    assert_eq!(
        drawn_lines(&mut b),
        want,
        "the grouped graph after a reload"
    );
    let shot = dir.join("serve-group.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!(
        "screenshot of the graph grouped by process: {}",
        shot.display()
    );
    let (status, body) = s.request("GET", "/api/chains?from=0&to=1000&group=pod", &s.host);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("group="), "{body}");
    assert_eq!(b.eval("window.__errs"), json!([]));
}

/// Issue 36: the page asks for its graph's width in pixels (`px=`), and the server merges
/// each frame's children narrower than a pixel into one grey `[N frames below a pixel]`
/// frame: what is drawn is exactly `chains --window` summed into those frames, every other
/// frame at least a pixel wide, in a fraction of the bytes. A click on a frame with grey
/// frames below it asks again at that frame's scale (`zoom=`): its subtree drawn exactly,
/// every frame of it at least a pixel wide again.
#[test]
fn frames_below_a_pixel_in_the_page() {
    let Some((dir, trace, s, mut b)) = page_on(
        ("busy-server", 100_000),
        "serve-merged",
        "window.explorer && explorer.heat && explorer.chains && explorer.waits && explorer.busy === 0",
    ) else {
        return;
    };
    let dur = dur_of(&s);
    assert_eq!(b.eval("explorer.range"), json!({"from": 0, "to": dur}));
    let cli = chains_window(&trace, 0, dur);
    let c =
        b.eval("[explorer.chains.merged_frames, explorer.chains.remainders, explorer.chains.px]");
    assert!(c[0].as_u64().unwrap() > 1000, "frames merged: {c}");
    assert_eq!(
        b.eval("explorer.frames().filter(f => f.merged).length"),
        c[1]
    );
    assert_eq!(drawn_lines(&mut b), as_drawn(&mut b, &cli));
    let narrow = "explorer.frames().filter(f => !f.merged && f.w < 0.999).length";
    assert_eq!(
        b.eval(narrow),
        json!(0),
        "a frame narrower than a pixel drawn"
    );
    // A frame's tooltip is made when the mouse reaches it (the canvas's title), and the
    // frame is outlined.
    let tip_path = b.eval("explorer.frames()[1].path");
    let tip_path = tip_path.as_str().unwrap();
    let r = frame_on_screen(&mut b, tip_path);
    let (x, y, w) = (
        r[0].as_f64().unwrap(),
        r[1].as_f64().unwrap(),
        r[2].as_f64().unwrap(),
    );
    b.call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": x + w / 2.0, "y": y + 8.0}),
    );
    let tip = b.eval(
        "(() => { const o = document.getElementById('flamehover'); \
         return [document.getElementById('flamecanvas').title, o.hidden, o.style.width]; })()",
    );
    assert_eq!(tip[1], json!(false), "hovered frame outlined: {tip}");
    let outline: f64 = tip[2]
        .as_str()
        .unwrap()
        .trim_end_matches("px")
        .parse()
        .unwrap();
    assert!(
        (outline - w).abs() < 0.01,
        "outline {outline} px, frame {w} px: {tip}"
    );
    let tip = tip[0].as_str().unwrap();
    assert!(
        tip.starts_with(&format!("{}\n", tip_path.rsplit(';').next().unwrap()))
            && tip.contains('%'),
        "{tip_path}: {tip}"
    );
    let bytes = |q: &str| {
        s.request(
            "GET",
            &format!("/api/chains?from=0&to={dur}{q}"),
            &s.host.clone(),
        )
        .1
        .len()
    };
    let (full, merged) = (bytes(""), bytes(&format!("&px={}", c[2])));
    eprintln!("answer: {full} bytes with every frame, {merged} merged below a pixel ({c})");
    assert!(merged * 4 < full, "{merged} vs {full}");
    let shot = dir.join("serve-merged.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!("screenshot of the merged graph: {}", shot.display());

    // The widest frame (not full width) with grey frames below it.
    let path = b.eval(
        "(() => { const c = explorer.chains; const has = new Array(c.nodes.length).fill(false); \
         for (let i = c.nodes.length - 1; i > 0; i--) { const n = c.nodes[i]; if (n.kind === 'merged' || has[i]) has[n.parent] = true; } \
         const paths = nodePaths(c.nodes); let best = -1; \
         for (let i = 1; i < c.nodes.length; i++) { const n = c.nodes[i]; \
           if (has[i] && n.kind !== 'merged' && n.value < c.nodes[0].value && (best < 0 || n.value > c.nodes[best].value)) best = i; } \
         return paths[best].slice(1); })()",
    );
    let path = path.as_str().unwrap().to_string();
    click_frame(&mut b, &path);
    wait_for(
        &mut b,
        &format!(
            "explorer.chains.zoom === {} && explorer.busy === 0",
            serde_json::to_string(&path).unwrap()
        ),
    );
    assert_eq!(b.eval("explorer.zoom.join(';')"), json!(path));
    let want: BTreeMap<String, u64> = as_drawn(&mut b, &cli)
        .into_iter()
        .filter(|(l, _)| through(l, &path) || through(&path, l))
        .collect();
    assert_eq!(drawn_lines(&mut b), want, "the zoomed frame's subtree");
    assert_eq!(
        b.eval(narrow),
        json!(0),
        "a frame narrower than a pixel drawn"
    );
    let shot = dir.join("serve-merged-zoom.png");
    std::fs::write(&shot, b.screenshot_png()).unwrap();
    eprintln!(
        "screenshot of the zoomed frame, asked again at its scale: {}",
        shot.display()
    );
    assert_eq!(b.eval("window.__errs"), json!([]), "console errors");
    assert_eq!(b.eval("explorer.errors"), json!([]));
}

/// Issue 36's "Done when": from mouse-up to the graph drawn, for a 1 s range at each of
/// `CHAINREC_BENCH_STARTS` (seconds, default "1 8 16") of `CHAINREC_BENCH_TRACE`, served by
/// `CHAINREC_BENCH_BIN` (default this build) once indexed, in headless chromium (1200 x 700):
/// the page's own `selectRange` (what mouse-up calls) until a frame after the graph is
/// drawn (`requestAnimationFrame`, then a task), with the answer's wait (request to last
/// byte, from the Resource Timing entry), bytes and frames. `benches/serve_drawn.sh` runs it.
#[test]
#[ignore = "a benchmark on a given trace: benches/serve_drawn.sh"]
fn time_to_drawn() {
    let trace = PathBuf::from(std::env::var("CHAINREC_BENCH_TRACE").expect("CHAINREC_BENCH_TRACE"));
    let cmd = match std::env::var("CHAINREC_BENCH_BIN") {
        Ok(b) => std::process::Command::new(b),
        Err(_) => bin(),
    };
    let starts = std::env::var("CHAINREC_BENCH_STARTS").unwrap_or_else(|_| "1 8 16".into());
    let s = Served::start_cmd(cmd, &trace, &[]);
    while s.get("/api/info")["indexing"]["done"] == json!(false) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut b = open_page(
        &s,
        "bench-drawn",
        "window.explorer && explorer.heat && explorer.chains && explorer.busy === 0",
    );
    for start in starts.split_whitespace() {
        let from = (start.parse::<f64>().unwrap() * 1e9) as u64;
        let to = from + 1_000_000_000;
        b.eval(&format!(
            "(() => {{ performance.clearResourceTimings(); window.__drawn = null; const t0 = performance.now(); \
             selectRange({from}, {to}).then(() => requestAnimationFrame(() => setTimeout(() => {{ \
             window.__drawn = performance.now() - t0; }}, 0))); return true; }})()"
        ));
        let t0 = Instant::now();
        while b.eval("window.__drawn !== null") != json!(true) {
            assert!(t0.elapsed() < Duration::from_secs(120), "no graph");
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = b.eval(
            "(() => { const e = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/chains')).pop(); \
             return [window.__drawn, e.responseEnd - e.startTime, e.encodedBodySize, explorer.chains.frames, \
             (explorer.frames ? explorer.frames().length : document.querySelectorAll('#flame .f').length), \
             explorer.errors.length]; })()",
        );
        // The graph drawn again alone (no answer): the script's part.
        let js = b.eval(
            "(() => { const t = performance.now(); drawFlame(); return performance.now() - t; })()",
        );
        let ms = |i: usize| r[i].as_f64().unwrap_or(0.0);
        eprintln!(
            "time_to_drawn: 1 s range at {start} s: mouse-up to drawn {:.0} ms (answer {:.0} ms, \
             parse and draw {:.0} ms, of which drawing the graph {:.0} ms), {} bytes, \
             {} frames, {} drawn, {} errors",
            ms(0),
            ms(1),
            ms(0) - ms(1),
            js.as_f64().unwrap_or(0.0),
            r[2],
            r[3],
            r[4],
            r[5]
        );
    }
}
