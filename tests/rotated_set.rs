//! The analyses of a rotated set (the numbered files of one `record --rotate`) equal those
//! of the same recording made as one file, byte for byte: a synthetic busy-server trace is
//! split by the recorder's own RotatingWriter (`MemTrace::write_rotated`), waits that span
//! a file boundary included. Sets that are not one recording are refused with an error
//! naming the files.

mod common;
use chainrec_format::{TraceReader, WriterOptions};
use common::run_on as run;
use common::{bin, fails_with, split_rotated, tmpdir};
use std::path::{Path, PathBuf};

/// A busy-server trace as one file, and the same recording as a rotated set of ≥ 5 files.
fn single_and_set(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let single = dir.join("single.zst");
    let s = single.to_str().unwrap();
    run(
        &[
            "synth",
            "--scenario",
            "busy-server",
            "--events",
            "120000",
            "-o",
            s,
        ],
        &[],
    );
    let files = split_rotated(&single, &dir.join("r.zst"), 6, 4_000);
    assert!(files.len() >= 5, "{} files", files.len());
    (single, files)
}

#[test]
fn every_analysis_of_a_rotated_set_equals_that_of_the_single_file() {
    let dir = tmpdir("rotated-set");
    let (single, set) = single_and_set(&dir);
    let one = std::slice::from_ref(&single);
    // Each view, byte for byte (folded lines and weights; JSON of every wait).
    let views: &[&[&str]] = &[
        &["chains"],
        &["chains", "--mode", "last", "--unit", "ns"],
        &["chains", "--no-dedup", "--max-depth", "3"],
        &["offcpu"],
        &["wakeup"],
        &["offwake"],
        &["waits", "--json", "--no-dedup"],
        &["top", "-n", "30"],
        &["script"],
    ];
    for args in views {
        let want = run(args, one);
        assert!(!want.is_empty(), "{args:?}: empty output");
        assert!(
            run(args, &set) == want,
            "{args:?}: the rotated set differs from the single file"
        );
    }
    // A directory holding the set reads as the set.
    let by_dir = dir.join("set");
    std::fs::create_dir(&by_dir).unwrap();
    for f in &set {
        std::fs::rename(f, by_dir.join(f.file_name().unwrap())).unwrap();
    }
    let set: Vec<PathBuf> = set
        .iter()
        .map(|f| by_dir.join(f.file_name().unwrap()))
        .collect();
    assert!(run(&["chains"], std::slice::from_ref(&by_dir)) == run(&["chains"], one));

    // Waits that span a file boundary: off CPU in one file, woken and back in a later
    // one. They are whole in the set's output (equal to the single file's, above); check
    // that there are such waits, with chains.
    let boundaries: Vec<u64> = set[..set.len() - 1]
        .iter()
        .map(|f| TraceReader::open(f).unwrap().meta().end_ns)
        .collect();
    let waits = String::from_utf8(run(&["waits", "--json", "--no-dedup"], &set)).unwrap();
    let spanning: Vec<serde_json::Value> = waits
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|w| {
            let (out, back) = (w["switch_out_ns"].as_u64(), w["switch_in_ns"].as_u64());
            let (Some(out), Some(back)) = (out, back) else {
                return false;
            };
            boundaries.iter().any(|&b| out < b && b < back)
        })
        .collect();
    let with_chain = spanning
        .iter()
        .filter(|w| w["hops"].as_array().is_some_and(|h| !h.is_empty()))
        .count();
    assert!(
        with_chain >= 10,
        "{} waits span a boundary, {with_chain} with a waker",
        spanning.len()
    );

    // critical-path of a thread with a spanning wait.
    let tid = spanning[0]["tid"].as_u64().unwrap().to_string();
    let cp = ["critical-path", "-t", &tid, "--json"];
    assert!(run(&cp, &set) == run(&cp, one), "critical-path differs");

    // info: the whole duration and every event, equal to the sum over the files.
    let info = |t: &[PathBuf]| -> serde_json::Value {
        serde_json::from_slice(&run(&["info", "--json", "--verify"], t)).unwrap()
    };
    let (whole, joined) = (info(one), info(&set));
    for key in [
        "events",
        "duration_ns",
        "first_ts",
        "last_ts",
        "events_by_kind",
        "stacks",
        "tasks",
    ] {
        assert_eq!(joined[key], whole[key], "info {key}");
    }
    let per_file: u64 = set
        .iter()
        .map(|f| info(std::slice::from_ref(f))["events"].as_u64().unwrap())
        .sum();
    assert_eq!(joined["events"].as_u64(), Some(per_file));
    assert_eq!(joined["files"].as_array().map(Vec::len), Some(set.len()));
}

#[test]
fn sets_that_are_not_one_recording_are_refused_naming_the_files() {
    let dir = tmpdir("rotated-set-refused");
    let (single, set) = single_and_set(&dir);
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    let out = bin()
        .arg("chains")
        .args([&set[0], &set[2]])
        .output()
        .unwrap();
    fails_with(&out, "file number 1 is missing");
    fails_with(&out, &name(&set[0]));
    fails_with(&out, &name(&set[2]));
    let out = bin()
        .arg("waits")
        .args([&set[1], &set[1]])
        .output()
        .unwrap();
    fails_with(&out, "overlap");
    let out = bin().arg("info").args([&single, &set[1]]).output().unwrap();
    fails_with(&out, "not files of one recording");
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = bin().arg("top").arg(&empty).output().unwrap();
    fails_with(&out, "no trace files");
}

/// `trace` as recorded on `host` (a copy with another host name).
fn on_host(trace: &Path, host: &str, out: &Path) -> PathBuf {
    let mut mem = TraceReader::open(trace).unwrap().to_mem().unwrap();
    mem.meta.host = host.into();
    mem.write_to(out, WriterOptions::default()).unwrap();
    out.to_path_buf()
}

#[test]
fn chains_of_several_hosts_put_the_host_as_root_frame_of_each_line() {
    let dir = tmpdir("several-hosts");
    let relay = dir.join("relay.zst");
    let disk = dir.join("disk.zst");
    let r = relay.to_str().unwrap();
    let d = disk.to_str().unwrap();
    run(
        &[
            "synth",
            "--scenario",
            "pipe-relay",
            "--events",
            "3000",
            "-o",
            r,
        ],
        &[],
    );
    run(
        &[
            "synth",
            "--scenario",
            "disk-irq",
            "--events",
            "3000",
            "-o",
            d,
        ],
        &[],
    );
    let web = on_host(&relay, "web;1", &dir.join("web.zst"));
    // The second host's recording as a rotated set: read as one within its host.
    let db_one = on_host(&disk, "db", &dir.join("db-one.zst"));
    let db_set = split_rotated(&db_one, &dir.join("db.zst"), 3, 200);
    assert!(db_set.len() >= 3, "{db_set:?}");
    for view in ["chains", "offcpu", "wakeup", "offwake"] {
        let lines = |t: &[PathBuf]| String::from_utf8(run(&[view], t)).unwrap();
        let (web_lines, db_lines) = (
            lines(std::slice::from_ref(&web)),
            lines(std::slice::from_ref(&db_one)),
        );
        assert!(!web_lines.is_empty() && !db_lines.is_empty());
        // Hosts in name order, each line under its host (`;` in a name would split it).
        let mut want = String::new();
        for l in db_lines.lines() {
            want += &format!("db;{l}\n");
        }
        for l in web_lines.lines() {
            want += &format!("web_1;{l}\n");
        }
        let mut all: Vec<PathBuf> = vec![web.clone()];
        all.extend(db_set.iter().cloned());
        assert_eq!(lines(&all), want, "{view}");
    }
    // Commands that need one recording say so.
    let out = bin().arg("waits").args([&web, &db_one]).output().unwrap();
    fails_with(&out, "several hosts");
    // An SVG of several hosts: one graph, each host a frame on the root holding exactly
    // its own lines' weight, the hosts named in the title.
    for (view, title) in [("chains", "Chain graph"), ("offwake", "Off-wake time")] {
        let svg = dir.join(format!("{view}.svg"));
        let total = |t: &PathBuf| -> u64 {
            let out = String::from_utf8(run(&[view], std::slice::from_ref(t))).unwrap();
            let w = out.lines().map(|l| l.rsplit_once(' ').unwrap().1);
            w.map(|w| w.parse::<u64>().unwrap()).sum()
        };
        let mut args = vec![view.to_string(), "--svg".into()];
        args.push(svg.to_str().unwrap().into());
        run(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            &[web.clone(), db_one.clone()],
        );
        let text = std::fs::read_to_string(&svg).unwrap();
        let frames = svg_frames(&text);
        let root = frames
            .iter()
            .find(|f| f.0.starts_with("all: "))
            .unwrap_or_else(|| panic!("{view}: no root frame"));
        assert!(root.0.contains(" waits on 2 hosts"), "{view}: {}", root.0);
        let on_root: Vec<(&str, u64)> = frames
            .iter()
            .filter(|f| f.1 + 16 == root.1)
            .map(|f| (f.0.as_str(), f.2))
            .collect();
        assert_eq!(
            on_root,
            [("db", total(&db_one)), ("web_1", total(&web))],
            "{view}"
        );
        assert_eq!(root.2, total(&db_one) + total(&web), "{view}");
        assert!(
            text.contains(&format!(">{title}: 2 hosts: db, web_1</text>")),
            "{view}: title"
        );
    }
}

/// The frames of an SVG as (name, y, weight), in document order.
fn svg_frames(svg: &str) -> Vec<(String, u64, u64)> {
    let attr = |g: &str, name: &str| -> String {
        let at = g.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        g[at..].split('"').next().unwrap().to_string()
    };
    svg.split("<g><title>")
        .skip(1)
        .map(|g| {
            let title = g.split("</title>").next().unwrap();
            let name = title.rsplit_once(" (").unwrap().0.to_string();
            (
                name,
                attr(g, "y").parse().unwrap(),
                attr(g, "fg:w").parse().unwrap(),
            )
        })
        .collect()
}
