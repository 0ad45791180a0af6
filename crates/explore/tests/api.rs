//! The explorer's endpoints as functions of the URL, on synthetic traces: exact JSON
//! (golden files in testdata/golden/serve-*.json; CHAINREC_UPDATE_GOLDEN=1 rewrites
//! them), the waits through a frame adding up to that frame's weight, and bad requests
//! answered with a 4xx and a message.

use chainrec_chain::Analysis;
use chainrec_explore::Explorer;
use chainrec_format::TraceReader;
use chainrec_testkit::scratch::ScratchDir;
use chainrec_testkit::{golden, scenario};
use serde_json::Value;
use std::path::PathBuf;

fn explorer(name: &str, events: u64) -> (ScratchDir, Explorer) {
    let dir = ScratchDir::new("explore-api");
    let path = dir.file("trace.zst");
    let m = scenario::generate(name, events);
    scenario::write(&path, name, events, 500, &m);
    let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
    let ex = Explorer::new(an, format!("{name}.zst"), true).unwrap();
    (dir, ex)
}

fn get(ex: &Explorer, url: &str) -> Value {
    let r = ex.handle(url);
    assert_eq!(r.status, 200, "{url}: {}", r.text());
    assert_eq!(r.content_type, "application/json");
    serde_json::from_slice(&r.body).unwrap()
}

fn check_golden(name: &str, v: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/golden")
        .join(name);
    let actual = serde_json::to_string_pretty(v).unwrap() + "\n";
    let expected = golden::expected(&path, &actual);
    assert!(
        actual == expected,
        "{} differs (CHAINREC_UPDATE_GOLDEN=1 rewrites it; look at the diff)",
        path.display()
    );
}

use chainrec_testkit::flat_tree::frames;

#[test]
fn golden_heatmap_chains_and_waits() {
    let (_d, ex) = explorer("pipe-relay", 4000);
    let info = get(&ex, "/api/info");
    assert_eq!(info["events"], 4011);
    check_golden("serve-heatmap.json", &get(&ex, "/api/heatmap"));
    check_golden(
        "serve-heatmap-wakeups.json",
        &get(
            &ex,
            "/api/heatmap?metric=wakeups&rows=10&comm=%5Ecr-sink%24",
        ),
    );
    // 1.2 s .. 1.5 s from the trace start: 30 periods of the 10 ms timer.
    let chains = get(&ex, "/api/chains?from=1200000000&to=1500000000");
    check_golden("serve-chains.json", &chains);
    let frame = "cr-sink;sink_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;relay_loop;cr-relay";
    let waits = get(
        &ex,
        &format!(
            "/api/waits?frame={}&from=1200000000&to=1500000000&limit=2",
            frame.replace(';', "%3B")
        ),
    );
    check_golden("serve-waits.json", &waits);
    // frame= empty: the root, every wait of the range; the page opens on the longest. The
    // root's ns is the whole graph's, and the waits through the frame above are among them.
    let all = get(
        &ex,
        "/api/waits?frame=&from=1200000000&to=1500000000&limit=50",
    );
    assert_eq!(all["matched_ns"], chains["nodes"][0]["value"]);
    assert_eq!(all["matched_waits"], chains["counts"]["roots"]);
    assert!(all["matched_waits"].as_u64() >= waits["matched_waits"].as_u64());
    let through: Vec<u64> = all["waits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["through_ns"].as_u64().unwrap())
        .collect();
    assert!(
        through.windows(2).all(|p| p[0] >= p[1]),
        "longest first: {through:?}"
    );
    // The first of them, its thread's critical path from 5 ms before its switch-out to
    // 5 ms after its switch-in (what the page asks for it, with its margin).
    let w = &waits["waits"][0]["wait"];
    let start = info["start_ns"].as_u64().unwrap();
    let from = w["switch_out_ns"].as_u64().unwrap() - start - 5_000_000;
    let to = w["switch_in_ns"].as_u64().unwrap() - start + 5_000_000;
    let cp = get(
        &ex,
        &format!("/api/critpath?tid={}&from={from}&to={to}", w["tid"]),
    );
    check_golden("serve-critpath.json", &cp);
    // Its blocked segment from the switch-out is the wait, behind the same chain.
    let seg = cp["segments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["start_ns"] == w["switch_out_ns"])
        .expect("a segment starts at the switch-out");
    assert_eq!(seg["kind"], "blocked");
    assert_eq!(seg["end_ns"], w["wake_ns"]);
    let names: Vec<&Value> = seg["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| &l["tid"])
        .collect();
    let hops: Vec<&Value> = w["hops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| !h["metal"].as_bool().unwrap())
        .map(|h| &h["waker_tid"])
        .collect();
    assert_eq!(names[..hops.len()], hops[..], "{seg}");
}

/// The heat map filtered by cgroup: only the threads in the matching cgroups count.
#[test]
fn heatmap_by_cgroup() {
    let (_d, ex) = explorer("containers", 4000);
    assert_eq!(get(&ex, "/api/info")["cgroups"], true);
    let all = get(&ex, "/api/heatmap")["total"].as_u64().unwrap();
    let docker = get(&ex, "/api/heatmap?cgroup=docker");
    let by_comm = get(&ex, "/api/heatmap?comm=%5Ecr-web%24")["total"]
        .as_u64()
        .unwrap();
    let t = docker["total"].as_u64().unwrap();
    assert!(t > 0 && t < all, "{t} of {all}");
    // cr-web is the docker container's one thread.
    assert_eq!(t, by_comm);
    let none = get(&ex, "/api/heatmap?cgroup=no-such-cgroup");
    assert_eq!(none["total"], 0);
    let (_d2, plain) = explorer("pipe-relay", 1000);
    assert_eq!(get(&plain, "/api/info")["cgroups"], false);
    let r = plain.handle("/api/heatmap?cgroup=x");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("records no cgroups"), "{}", r.text());
}

/// `chainrec report`'s data: the whole trace, then the heaviest seconds in time order,
/// each the `/api/chains` answer of its range; the page inlines it safely.
#[test]
fn static_report_data() {
    let (_d, ex) = explorer("pipe-relay", 4000);
    let d = ex.static_data(3, 800).unwrap();
    let ranges = d["ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), 4);
    assert_eq!(ranges[0]["label"], "whole trace");
    let mut last = 0;
    for r in ranges {
        let (f, t) = (r["from_ns"].as_u64().unwrap(), r["to_ns"].as_u64().unwrap());
        assert_eq!(
            r["chains"],
            get(&ex, &format!("/api/chains?from={f}&to={t}&px=800"))
        );
        if r != &ranges[0] {
            assert!(f >= last && t > f, "time order");
            last = t;
        }
    }
    assert_eq!(d["heatmap"], get(&ex, "/api/heatmap"));
    let page = ex.static_page(3, 800).unwrap();
    assert!(!page.contains("src=\"app.js\"") && !page.contains("href=\"app.css\""));
    assert!(page.contains("Content-Security-Policy"));
    // One data element, and no `</` inside it to end it early.
    let at = page.find("id=\"chainrec-data\">").unwrap();
    let data = &page[at..];
    let end = data.find("</script>").unwrap();
    assert!(!data[..end].contains("</"));
    let v: Value = serde_json::from_str(&data["id=\"chainrec-data\">".len()..end]).unwrap();
    assert_eq!(v, d);
}

/// For every frame of a range's graph, the waits through it weigh what the frame does,
/// and their number is at most the range's roots.
#[test]
fn waits_through_a_frame_add_up_to_its_weight() {
    for (scenario, events) in [
        ("pipe-relay", 3000),
        ("net-softirq", 3000),
        ("preemption", 3000),
    ] {
        let (_d, ex) = explorer(scenario, events);
        let (from, to) = (300_000_000u64, 900_000_000u64);
        let chains = get(&ex, &format!("/api/chains?from={from}&to={to}"));
        let roots = chains["counts"]["roots"].as_u64().unwrap();
        let all = frames(&chains);
        assert!(all.len() > 5, "{scenario}: {} frames", all.len());
        // The root's children (the waiting threads) and a few deep frames.
        let picks: Vec<_> = all
            .iter()
            .filter(|(p, ..)| !p.contains(';'))
            .chain(all.iter().step_by(7))
            .collect();
        for (path, value, _) in picks {
            let q = path
                .bytes()
                .map(|b| match b {
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => {
                        (b as char).to_string()
                    }
                    b => format!("%{b:02X}"),
                })
                .collect::<String>();
            let w = get(
                &ex,
                &format!("/api/waits?frame={q}&from={from}&to={to}&limit=3"),
            );
            assert_eq!(
                w["matched_ns"].as_u64().unwrap(),
                *value,
                "{scenario}: {path}"
            );
            let n = w["matched_waits"].as_u64().unwrap();
            assert!(
                n >= 1 && n <= roots,
                "{scenario}: {path}: {n} waits of {roots}"
            );
            let listed: Vec<u64> = w["waits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["through_ns"].as_u64().unwrap())
                .collect();
            assert_eq!(listed.len() as u64, n.min(3));
            assert!(
                listed.windows(2).all(|p| p[0] >= p[1]),
                "heaviest first: {listed:?}"
            );
        }
    }
}

#[test]
fn bad_requests_get_a_4xx_with_a_message() {
    let (_d, ex) = explorer("pipe-relay", 2000);
    let cases = [
        ("/api/chains?from=x", 400, "non-negative integer"),
        ("/api/chains?from=-5", 400, "non-negative integer"),
        ("/api/chains?from=20&to=10", 400, "is after"),
        ("/api/chains?from=99000000000000", 400, "is after"),
        (
            "/api/chains?from=99000000000000&to=99000000000001",
            400,
            "range",
        ),
        ("/api/chains?from=1&from=2", 400, "twice"),
        ("/api/chains?bogus=1", 400, "unknown parameter"),
        ("/api/chains?from=%zz", 400, "escape"),
        ("/api/chains?from=%C3%28", 400, "UTF-8"),
        (
            "/api/chains?from=184467440737095516150",
            400,
            "non-negative integer",
        ),
        ("/api/heatmap?metric=cpu", 400, "metric"),
        ("/api/heatmap?rows=0", 400, "rows"),
        ("/api/heatmap?rows=100000", 400, "rows"),
        ("/api/heatmap?comm=(", 400, "regex"),
        ("/api/heatmap?tid=99999999999", 400, "too large"),
        ("/api/waits", 400, "frame= is required"),
        ("/api/waits?frame=a&limit=0", 400, "limit"),
        ("/api/info?x=1", 400, "unknown parameter"),
        ("/api/critpath", 400, "tid= is required"),
        ("/api/critpath?tid=x", 400, "non-negative integer"),
        ("/api/critpath?tid=99999999999", 400, "too large"),
        ("/api/critpath?tid=77777", 400, "does not appear"),
        ("/api/critpath?tid=103&from=5&to=5", 400, "empty"),
        (
            "/api/critpath?tid=103&from=99000000000000&to=99000000000001",
            400,
            "outside",
        ),
        ("/api/critpath?tid=103&margin=1", 400, "unknown parameter"),
        ("/api/heatmap?cgroup=x", 400, "records no cgroups"),
        ("/../../etc/passwd", 404, "no such page"),
        ("/etc/passwd", 404, "no such page"),
        ("/api/../Cargo.toml", 404, "no such page"),
        ("/app.js/../../x", 404, "no such page"),
        ("//app.js", 404, "no such page"),
        ("/%2e%2e/trace.zst", 404, "no such page"),
        ("", 404, "no such page"),
    ];
    for (url, status, phrase) in cases {
        let r = ex.handle(url);
        assert_eq!(r.status, status, "{url}: {}", r.text());
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains(phrase), "{url}: {msg}");
    }
    // The assets are built in and served as they are.
    let page = ex.handle("/");
    assert_eq!(page.status, 200);
    assert!(page.text().contains("<script src=\"app.js\">"));
    assert!(ex.handle("/app.js").text().contains("window.explorer"));
    assert!(!ex.handle("/app.css").body.is_empty());
}

/// The differential view: each frame's value in the base range is that range's own
/// graph's value of the same path (0 where the base has none).
#[test]
fn base_range_values_are_the_base_graphs_values() {
    let (_d, ex) = explorer("tcp-loopback", 4000);
    let (a, b) = (
        (500_000_000u64, 1_500_000_000u64),
        (2_000_000_000u64, 2_400_000_000u64),
    );
    let v = get(
        &ex,
        &format!(
            "/api/chains?from={}&to={}&base_from={}&base_to={}",
            a.0, a.1, b.0, b.1
        ),
    );
    let base = get(&ex, &format!("/api/chains?from={}&to={}", b.0, b.1));
    let theirs: std::collections::HashMap<String, u64> =
        frames(&base).into_iter().map(|(p, v, _)| (p, v)).collect();
    let values = v["base"]["values"].as_array().unwrap();
    assert_eq!(values.len(), v["nodes"].as_array().unwrap().len());
    assert_eq!(values[0], base["nodes"][0]["value"]);
    assert_eq!(v["base"]["total_ns"], base["nodes"][0]["value"]);
    let mine = frames(&v);
    assert!(mine.len() > 5);
    for (i, (path, ..)) in mine.iter().enumerate() {
        let want = theirs.get(path).copied().unwrap_or(0);
        assert_eq!(values[i + 1].as_u64().unwrap(), want, "{path}");
    }
    // The same range as its own base: every value equal.
    let same = get(
        &ex,
        &format!(
            "/api/chains?from={}&to={}&base_from={}&base_to={}",
            a.0, a.1, a.0, a.1
        ),
    );
    let own: Vec<Value> = same["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["value"].clone())
        .collect();
    assert_eq!(same["base"]["values"].as_array().unwrap(), &own);
    for (url, phrase) in [
        ("/api/chains?base_from=1", "go together"),
        ("/api/chains?base_from=5&base_to=1", "base: from=5 is after"),
    ] {
        let r = ex.handle(url);
        assert_eq!(r.status, 400, "{url}");
        assert!(r.text().contains(phrase), "{url}: {}", r.text());
    }
}

/// A newer request of the same page (`session=`) and endpoint cancels the one running:
/// of two overlapping whole-trace graphs of one session, exactly one is answered and the
/// other gets a 409 (whichever registered first); another session's request and one
/// without a session are never cancelled; `/api/info` counts the cancellation. A bad
/// session id is a 400.
#[test]
fn a_newer_request_of_the_page_cancels_the_running_one() {
    let (_d, ex) = explorer("busy-server", 400_000);
    let info = get(&ex, "/api/info");
    let to = info["duration_ns"].as_u64().unwrap();
    let url = |session: &str| {
        let s = if session.is_empty() {
            String::new()
        } else {
            format!("&session={session}")
        };
        format!("/api/chains?from=0&to={to}{s}")
    };
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let first = s.spawn(|| ex.handle(&url("page1")).status);
        let other = s.spawn(|| ex.handle(&url("page2")).status);
        let none = s.spawn(|| {
            let t0 = std::time::Instant::now();
            let status = ex.handle(&url("")).status;
            eprintln!("a whole-trace graph took {:?}", t0.elapsed());
            status
        });
        // The first is registered at its start; the second arrives while it runs.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = ex.handle(&url("page1")).status;
        vec![
            first.join().unwrap(),
            second,
            other.join().unwrap(),
            none.join().unwrap(),
        ]
    });
    let mut page1 = [statuses[0], statuses[1]];
    page1.sort_unstable();
    assert_eq!(page1, [200, 409], "{statuses:?}");
    assert_eq!(&statuses[2..], &[200, 200], "{statuses:?}");
    let info = get(&ex, "/api/info");
    assert_eq!(info["ranges"]["cancelled"], 1, "{info}");
    // A session that ended frees its slot: the next request runs alone.
    assert_eq!(ex.handle(&url("page1")).status, 200);
    let bad = ex.handle(&format!("/api/chains?from=0&to={to}&session=a%20b"));
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("session="), "{}", bad.text());
}

/// Issue 36: `px=N` merges each frame's children narrower than a pixel of an N-pixel graph
/// into one `[K frames below a pixel]` frame, and nothing else changes: the frames kept are
/// exactly the un-merged graph's frames at least a pixel wide (same path, value, own
/// weight), each remainder holds its parent's merged children (their count in its name
/// and in `merged_frames`, their values and baseline values summed), so every width
/// still adds up; below a
/// zoomed frame the pixel is that frame's. No `px` (or `px=0`) is the answer as before,
/// byte for byte.
#[test]
fn frames_below_a_pixel_merge_exactly() {
    use std::collections::{BTreeMap, BTreeSet};
    let (_d, ex) = explorer("busy-server", 8_000);
    let dur = get(&ex, "/api/info")["duration_ns"].as_u64().unwrap();
    let base = format!("&base_from={}&base_to={}", dur / 2, dur);
    let mut merged_any = 0;
    for (from, to) in [(0, dur), (dur / 3, 2 * dur / 3)] {
        let plain = ex.handle(&format!("/api/chains?from={from}&to={to}{base}"));
        let zero = ex.handle(&format!("/api/chains?from={from}&to={to}{base}&px=0"));
        assert_eq!(plain, zero, "px=0 is no px");
        let full: Value = serde_json::from_slice(&plain.body).unwrap();
        assert_eq!(
            full["pruned_frames"], 0,
            "a graph small enough to compare whole"
        );
        let total = full["nodes"][0]["value"].as_u64().unwrap();
        let full_frames = frames(&full);
        let full_base = full["base"]["values"].as_array().unwrap();
        // path -> (value, own, base value, parent path)
        let mut by_path: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (i, (p, v, s)) in full_frames.iter().enumerate() {
            by_path.insert(p.clone(), (*v, *s, full_base[i + 1].as_u64().unwrap()));
            let parent = p.rsplit_once(';').map_or("", |(a, _)| a).to_string();
            children.entry(parent).or_default().push(p.clone());
        }
        by_path.insert(String::new(), (total, 0, full_base[0].as_u64().unwrap()));
        // A zoomed frame: the widest one two levels down with children.
        let zoom = full_frames
            .iter()
            .filter(|(p, _, _)| p.matches(';').count() == 1 && children.contains_key(p))
            .max_by_key(|(_, v, _)| *v)
            .map(|(p, ..)| p.clone())
            .unwrap();
        for px in [40u64, 300, 1500] {
            for z in ["", zoom.as_str()] {
                let zq = if z.is_empty() {
                    String::new()
                } else {
                    format!("&zoom={}", z.replace(';', "%3B"))
                };
                let m = get(
                    &ex,
                    &format!("/api/chains?from={from}&to={to}{base}&px={px}{zq}"),
                );
                assert!(m.get("nodes").is_none() && m["rows"].is_array(), "compact");
                assert_eq!(m["counts"], full["counts"]);
                assert_eq!(m["base"]["total_ns"], full["base"]["total_ns"]);
                // One pixel, in ns times px, at `path`: the zoomed frame's below it.
                let scale = |path: &str| {
                    if !z.is_empty() && (path == z || path.starts_with(&format!("{z};"))) {
                        by_path[z].0
                    } else {
                        total
                    }
                };
                let on_zoom =
                    |path: &str| !z.is_empty() && (z == path || z.starts_with(&format!("{path};")));
                let want_kept: BTreeSet<&String> = full_frames
                    .iter()
                    .filter(|(p, v, _)| {
                        let parent = p.rsplit_once(';').map_or("", |(a, _)| a);
                        on_zoom(p) || u128::from(*v) * u128::from(px) >= u128::from(scale(parent))
                    })
                    .map(|(p, ..)| p)
                    .collect();
                // Keeping is closed upwards (a parent is at least as wide as its child),
                // except that below the zoomed frame a pixel is finer.
                let got = frames(&m);
                let values = m["base"]["values"].as_array().unwrap();
                let (mut kept, mut remainders, mut merged_frames) = (BTreeSet::new(), 0, 0);
                for (i, (p, v, s)) in got.iter().enumerate() {
                    let b = values[i + 1].as_u64().unwrap();
                    let (parent, name) = p.rsplit_once(';').unwrap_or(("", p));
                    if name.ends_with(" below a pixel]") {
                        remainders += 1;
                        let merged: Vec<&String> = children[parent]
                            .iter()
                            .filter(|c| !want_kept.contains(c))
                            .collect();
                        assert!(!merged.is_empty(), "{p}");
                        let n = merged.len();
                        let want_name = if n == 1 {
                            "[1 frame below a pixel]".to_string()
                        } else {
                            format!("[{n} frames below a pixel]")
                        };
                        assert_eq!(name, want_name);
                        let sum = |k: usize| -> u64 {
                            merged
                                .iter()
                                .map(|c| match k {
                                    0 => by_path[*c].0,
                                    _ => by_path[*c].2,
                                })
                                .sum()
                        };
                        assert_eq!((*v, *s, b), (sum(0), sum(0), sum(2)), "{p}");
                        merged_frames += n;
                    } else {
                        assert!(want_kept.contains(p), "{p} kept at px={px} zoom={z}");
                        assert_eq!((*v, *s, b), by_path[p], "{p}");
                        kept.insert(p);
                    }
                }
                // Every frame that should be kept and whose parent is kept is there.
                for p in &want_kept {
                    let parent = p.rsplit_once(';').map_or("", |(a, _)| a);
                    if parent.is_empty() || kept.contains(&parent.to_string()) {
                        assert!(kept.contains(p), "{p} missing at px={px} zoom={z}");
                    }
                }
                assert_eq!(m["frames"], got.len() + 1);
                assert_eq!(m["remainders"], remainders);
                assert_eq!(m["merged_frames"], merged_frames);
                merged_any += merged_frames;
            }
        }
    }
    assert!(merged_any > 0, "some frames merged");
    for (url, phrase) in [
        ("/api/chains?px=-1", "px="),
        ("/api/chains?px=99999999", "px=99999999"),
        ("/api/chains?zoom=a", "zoom= needs px="),
    ] {
        let r = ex.handle(url);
        assert_eq!(r.status, 400, "{url}");
        assert!(r.text().contains(phrase), "{url}: {}", r.text());
    }
}
