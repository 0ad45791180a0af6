//! `chainrec export` with several outputs walks the trace with the engine once: the
//! profile rides on the Parquet writer's run, the critical paths of several threads share
//! one run, and every output is byte for byte what it is when written alone.

use chainrec_chain::{Analysis, Filter};
use chainrec_format::synth::{self, SynthParams, Tracker};
use chainrec_format::{MemTrace, TraceReader, WriterOptions};
use chainrec_parquet::{stacks_path, ParquetOutputs};
use chainrec_report::export::{Request, WaitsOutput};
use std::collections::BTreeMap;
use std::path::Path;

/// The `oncpu-worker` scenario (client 1301, worker 1302, samples) as an opened trace.
fn analysis(dir: &Path) -> Analysis {
    let params = SynthParams {
        events: 51,
        seed: 1,
    };
    let mut m = MemTrace::default();
    let mut meta = synth::meta("oncpu-worker", &params, vec![]);
    {
        let mut t = Tracker::new(&mut m);
        (synth::find("oncpu-worker").unwrap().generate)(&params, &mut t).unwrap();
        t.complete(&mut meta);
    }
    m.meta = meta;
    let p = dir.join("t.zst");
    let opts = WriterOptions {
        chunk_events: 8,
        ..WriterOptions::default()
    };
    m.write_to(&p, opts).unwrap();
    Analysis::from_reader(TraceReader::from_bytes(std::fs::read(&p).unwrap()).unwrap())
}

/// Which outputs to write.
#[derive(Clone, Copy)]
struct Ask {
    perfetto: bool,
    pprof: bool,
    parquet: bool,
}

/// Export `ask` (Perfetto with the critical paths of `tids`) into `out`: the engine runs it
/// took, and every file written by name.
fn export(dir: &Path, out: &str, ask: Ask, tids: &[u32]) -> (usize, BTreeMap<String, Vec<u8>>) {
    let out = dir.join(out);
    std::fs::create_dir_all(&out).unwrap();
    let an = analysis(dir);
    let path = |on: bool, name: &str| on.then(|| out.join(name));
    let (perfetto, pprof, parquet) = (
        path(ask.perfetto, "t.pftrace"),
        path(ask.pprof, "c.pb.gz"),
        path(ask.parquet, "w.parquet"),
    );
    let req = Request {
        trace: "t.zst",
        perfetto: perfetto.as_deref(),
        critical_path: tids,
        pprof: pprof.as_deref(),
        parquet: parquet.as_deref(),
        filtered: false,
        quiet: true,
    };
    req.check().unwrap();
    let ex = req.create().unwrap();
    let mut waits = parquet
        .as_deref()
        .map(|p| ParquetOutputs::create(p, &ex.dests()).unwrap());
    let w = waits.as_mut().map(|p| p as &mut dyn WaitsOutput);
    ex.write(&an, Filter::default(), w, &mut |_| {}).unwrap();
    let mut files = BTreeMap::new();
    let stacks = parquet.as_deref().map(stacks_path);
    for p in [perfetto, pprof, parquet, stacks].into_iter().flatten() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        files.insert(name, std::fs::read(&p).unwrap());
    }
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        files.len(),
        "no temporary file left"
    );
    (an.engine_runs(), files)
}

#[test]
fn several_outputs_of_one_run_equal_separate_runs() {
    let dir = std::env::temp_dir().join(format!("chainrec-one-pass-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let all = Ask {
        perfetto: true,
        pprof: true,
        parquet: true,
    };
    let none = Ask {
        perfetto: false,
        pprof: false,
        parquet: false,
    };
    let tids = [1302, 1301];
    let (runs, together) = export(&dir, "all", all, &tids);
    assert_eq!(
        runs, 2,
        "one run for both critical paths, one for the profile and the tables"
    );
    assert_eq!(
        together.keys().collect::<Vec<_>>(),
        ["c.pb.gz", "t.pftrace", "w.parquet", "w.stacks.parquet"]
    );
    let mut alone = BTreeMap::new();
    // Each output alone: one engine run each. (crates/chain/tests/critpath.rs: the paths of
    // one run equal those of separate runs.)
    let pprof = Ask {
        pprof: true,
        ..none
    };
    let parquet = Ask {
        parquet: true,
        ..none
    };
    let perfetto = Ask {
        perfetto: true,
        ..none
    };
    for (out, ask, with_tids) in [
        ("pprof", pprof, false),
        ("parquet", parquet, false),
        ("perfetto", perfetto, true),
    ] {
        let (runs, f) = export(&dir, out, ask, if with_tids { &tids } else { &[] });
        assert_eq!(runs, 1, "{out} alone");
        alone.extend(f);
    }
    for (name, bytes) in &together {
        assert!(
            alone[name] == *bytes,
            "{name}: written with the other outputs, it differs from {name} written alone"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
