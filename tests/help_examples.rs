//! Every example in `chainrec --help` and in each command's `--help` runs as written on a
//! synthetic trace: `trace.zst` stands for a `chainrec synth` trace (with on-CPU samples
//! for the commands that need them), `1234` for one of its threads (`-t`) or processes
//! (`-p`); a pipeline is cut at its first `|`, and `> FILE` writes FILE in a scratch
//! directory. The examples that need root (recording), run until stopped (`serve`) or
//! take minutes (a 50 M-event synth) are listed and not run here; `help_tests` in
//! src/main.rs checks that those parse too. Runs without root.

mod common;
use common::{bin, stderr, tmpdir};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// A synthetic trace and the ids that stand for `1234` in the examples run on it.
struct Trace {
    path: PathBuf,
    tid: &'static str,
    pid: &'static str,
}

fn synth(dir: &Path, scenario: &str, events: &str) -> PathBuf {
    let p = dir.join(format!("{scenario}.zst"));
    let out = bin()
        .args(["synth", "--scenario", scenario, "--events", events, "-o"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    p
}

/// The help text of `chainrec [cmd] --help`.
fn help(cmd: Option<&str>) -> String {
    let out = bin().args(cmd).arg("--help").output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The commands of `chainrec --help` (the `Commands:` list).
fn commands(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// The example command lines of a help text: the lines of its `Example(s)` paragraph that
/// start with `chainrec` (continuations after `\` joined), each cut before the words
/// that describe it (two spaces or more, outside quotes).
fn examples(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = help
        .lines()
        .skip_while(|l| !l.starts_with("Example"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim);
    while let Some(l) = lines.next() {
        let mut line = l.to_string();
        while line.ends_with('\\') {
            line.pop();
            line.push_str(lines.next().unwrap_or(""));
        }
        if line.starts_with("chainrec ") {
            out.push(cut_description(&line));
        }
    }
    out
}

fn cut_description(line: &str) -> String {
    let mut quote = None;
    let b = line.as_bytes();
    for i in 0..b.len() {
        match (quote, b[i]) {
            (None, q @ (b'\'' | b'"')) => quote = Some(q),
            (Some(q), c) if c == q => quote = None,
            (None, b' ') if b.get(i + 1) == Some(&b' ') => return line[..i].to_string(),
            _ => {}
        }
    }
    line.to_string()
}

/// Shell words: spaces split, single and double quotes group (no escapes in examples).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, ' ') => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            (_, c) => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(cur);
    }
    out
}

/// Why an example is not run here, if it is not.
fn not_run(args: &[String]) -> Option<&'static str> {
    match args.first().map(String::as_str) {
        Some("record" | "demo" | "workload") => Some("records with BPF or runs the workload"),
        Some("serve") => Some("serves until stopped"),
        _ if args
            .iter()
            .any(|a| a.starts_with("r.*") || a.starts_with("host") || a.ends_with('/')) =>
        {
            Some("reads a rotated set or several hosts' traces (tests/rotated_set.rs runs those)")
        }
        Some("synth") if args.iter().any(|a| a.len() > 7 && a.parse::<u64>().is_ok()) => {
            Some("a synthetic trace of tens of millions of events")
        }
        _ => None,
    }
}

#[test]
fn every_help_example_runs_on_a_synthetic_trace() {
    let dir = tmpdir("help_examples");
    let relay = Trace {
        path: synth(&dir, "pipe-relay", "4000"),
        tid: "103",
        pid: "100",
    };
    let sampled = Trace {
        path: synth(&dir, "oncpu-worker", "20000"),
        tid: "1301",
        pid: "1300",
    };
    let top = help(None);
    let mut pages = vec![(None, top.clone())];
    for c in commands(&top) {
        let h = help(Some(&c));
        pages.push((Some(c), h));
    }
    assert!(pages.len() > 15, "commands found: {}", pages.len());
    let (mut ran, mut skipped) = (0, Vec::new());
    for (page, text) in &pages {
        let found = examples(text);
        if page.is_some() {
            assert!(
                !found.is_empty() || !text.contains("Example"),
                "{page:?}: an Examples paragraph without a chainrec line"
            );
        }
        // Each page's examples run in order in a directory of their own (the synth
        // example writes the trace the next ones read).
        let cwd = dir.join(page.as_deref().unwrap_or("top"));
        std::fs::create_dir_all(&cwd).unwrap();
        for line in found {
            let mut args = words(&line);
            assert_eq!(args.remove(0), "chainrec", "{line}");
            if let Some(why) = not_run(&args) {
                skipped.push(format!("{line}  ({why})"));
                continue;
            }
            if let Some(i) = args.iter().position(|a| a == "|") {
                args.truncate(i);
            }
            let mut stdout_to = None;
            if let Some(i) = args.iter().position(|a| a == ">") {
                stdout_to = Some(cwd.join(&args[i + 1]));
                args.truncate(i);
            }
            let t = match args[0].as_str() {
                "oncpu" | "hotcold" | "critical-path" => &sampled,
                _ => &relay,
            };
            for i in 0..args.len() {
                if args[i] == "trace.zst" {
                    args[i] = t.path.display().to_string();
                } else if args[i] == "1234" {
                    args[i] = match args[i - 1].as_str() {
                        "-p" => t.pid,
                        _ => t.tid,
                    }
                    .to_string();
                }
            }
            let stdout = match &stdout_to {
                Some(f) => Stdio::from(std::fs::File::create(f).unwrap()),
                None => Stdio::piped(),
            };
            let out = bin()
                .args(&args)
                .current_dir(&cwd)
                .stdout(stdout)
                .stderr(Stdio::piped())
                .output()
                .unwrap();
            let err = stderr(&out);
            assert!(
                out.status.success() && !err.contains("panicked"),
                "{page:?}: `{line}` (run as chainrec {args:?}) failed: {err}"
            );
            if let Some(f) = &stdout_to {
                let n = std::fs::metadata(f).unwrap().len();
                assert!(n > 0, "`{line}`: {} is empty", f.display());
            }
            ran += 1;
        }
    }
    for s in &skipped {
        eprintln!("help example not run: {s}");
    }
    assert!(ran >= 40, "only {ran} examples ran");
}
