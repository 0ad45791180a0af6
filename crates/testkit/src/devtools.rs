//! A headless Debian chromium driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: commands on fd 3, replies on fd 4, NUL-terminated JSON), for
//! tests that check an SVG in a real browser (DOM state and pixels).

use crate::scratch::ScratchDir;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// The chromium binary (Debian's).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Viewport width (CSS pixels = screenshot pixels).
pub const W: u32 = 1200;
/// Viewport height.
pub const H: u32 = 700;

/// Whether chromium is installed; when not, a loud skip, or a panic when
/// `CHAINREC_REQUIRE_BROWSER=1`.
pub fn browser_available() -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    if std::env::var("CHAINREC_REQUIRE_BROWSER").as_deref() == Ok("1") {
        panic!("{CHROMIUM} is missing and CHAINREC_REQUIRE_BROWSER=1 (apt-get install chromium)");
    }
    eprintln!("SKIPPED: browser test: {CHROMIUM} not installed (apt-get install chromium; ./x.sh test does)");
    false
}

/// A headless chromium with one page attached, driven over `--remote-debugging-pipe`.
pub struct Browser {
    child: Child,
    to: std::fs::File,
    from: Receiver<Value>,
    next_id: u64,
    session: String,
    events: Vec<Value>,
    _profile: ScratchDir,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2 failed");
    (fds[0], fds[1])
}

impl Browser {
    /// Start chromium (profile in a scratch dir named after `tag`) and attach to a new
    /// blank page of [`W`] x [`H`].
    pub fn launch(tag: &str) -> Browser {
        let profile = ScratchDir::new(&format!("chromium-{tag}"));
        let (cmd_r, cmd_w) = pipe(); // we write commands, chromium reads fd 3
        let (ev_r, ev_w) = pipe(); // chromium writes fd 4, we read
        let mut command = Command::new(CHROMIUM);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--remote-debugging-pipe",
                &format!("--window-size={W},{H}"),
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: between fork and exec we only call fcntl and dup2 (async-signal-safe); the
        // fds are valid (just created) and dup2 clears O_CLOEXEC on the targets 3 and 4.
        unsafe {
            command.pre_exec(move || {
                // Move both out of the way first: either may already be fd 3 or 4.
                let a = libc::fcntl(cmd_r, libc::F_DUPFD, 10);
                let b = libc::fcntl(ev_w, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("spawn chromium");
        // SAFETY: the fds are ours, open, and each is wrapped exactly once.
        let (to, mut from_file) = unsafe {
            libc::close(cmd_r);
            libc::close(ev_w);
            (
                std::fs::File::from_raw_fd(cmd_w),
                std::fs::File::from_raw_fd(ev_r),
            )
        };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            loop {
                let n = match from_file.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..msg.len() - 1]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to,
            from: rx,
            next_id: 0,
            session: String::new(),
            events: Vec::new(),
            _profile: profile,
        };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let att = b.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        b.session = att["sessionId"].as_str().unwrap().to_string();
        b.call("Page.enable", json!({}));
        b.call("Runtime.enable", json!({}));
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": W, "height": H, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    fn recv(&mut self, deadline: Instant) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        self.from
            .recv_timeout(left)
            .expect("chromium did not answer within 30 s")
    }

    /// Send `method` without waiting for its reply (for input a dialog will block); its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        id
    }

    /// Call `method`; its result (panics on a protocol error or after 30 s).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = self.recv(deadline);
            if v["id"].as_u64() == Some(id) {
                if let Some(e) = v.get("error") {
                    panic!("{method} failed: {e}");
                }
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    /// Wait for an event named `method` (already received or coming).
    pub fn wait_event(&mut self, method: &str) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(i);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = self.recv(deadline);
            if v["method"] == method {
                return v;
            }
            self.events.push(v);
        }
    }

    /// Evaluate `expr` in the page; its value (panics on an exception).
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true}),
        );
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("script failed: {ex}\n{expr}");
        }
        r["result"]["value"].clone()
    }

    /// A left click at (`x`, `y`) with real mouse events.
    pub fn click(&mut self, x: f64, y: f64) {
        self.mouse_click(x, y, true);
    }

    /// A left click whose press and release are sent without waiting for their replies:
    /// a click that opens a dialog blocks the page until the dialog is answered.
    pub fn click_nowait(&mut self, x: f64, y: f64) {
        self.mouse_click(x, y, false);
    }

    fn mouse_click(&mut self, x: f64, y: f64, wait: bool) {
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": x, "y": y}),
        );
        for t in ["mousePressed", "mouseReleased"] {
            let params = json!({"type": t, "x": x, "y": y, "button": "left", "clickCount": 1});
            if wait {
                self.call("Input.dispatchMouseEvent", params);
            } else {
                self.send("Input.dispatchMouseEvent", params);
            }
        }
    }

    /// A screenshot as PNG bytes (to keep, and look at).
    pub fn screenshot_png(&mut self) -> Vec<u8> {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        base64_decode(r["data"].as_str().unwrap())
    }

    /// A screenshot: width, height and RGB bytes.
    pub fn screenshot(&mut self) -> (u32, u32, Vec<u8>) {
        let png_bytes = self.screenshot_png();
        let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        let channels = match info.color_type {
            png::ColorType::Rgba => 4,
            png::ColorType::Rgb => 3,
            other => panic!("unexpected png colour type {other:?}"),
        };
        let mut rgb = Vec::with_capacity((info.width * info.height * 3) as usize);
        for px in buf[..info.buffer_size()].chunks(channels) {
            rgb.extend_from_slice(&px[..3]);
        }
        (info.width, info.height, rgb)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Decode standard base64 (screenshots arrive that way).
pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 byte {c}"),
        }
    };
    let bytes: Vec<u8> = s
        .bytes()
        .filter(|&c| c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for group in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in group.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        for i in 0..group.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}
