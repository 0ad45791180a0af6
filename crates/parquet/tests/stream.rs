//! The waits table is written in row groups as the engine emits waits (bounded memory):
//! with a small layout, a synthetic busy server gives many row groups, and reading the file
//! back with the parquet crate's own reader gives every record, in order, with its levels.
//! (tests/parquet.rs of the binary checks every value with pyarrow and DuckDB.)

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use chainrec_chain::{Config, Engine, TraceRef, WaitRecord};
use chainrec_format::synth::{find, SynthParams};
use chainrec_format::{MemTrace, StackId};
use chainrec_parquet::{write_stacks, Layout, WaitsWriter};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn scenario(name: &str, events: u64) -> MemTrace {
    let params = SynthParams { events, seed: 1 };
    let mut t = MemTrace {
        meta: chainrec_format::synth::meta(name, &params, vec![]),
        ..MemTrace::default()
    };
    (find(name).unwrap().generate)(&params, &mut t).unwrap();
    t
}

#[test]
fn row_groups_are_written_as_waits_come() {
    let t = scenario("busy-server", 40_000);
    let layout = Layout {
        batch_rows: 300,
        row_group_rows: 1000,
    };
    // Time-bounded, default depth, dedup, run-queue parts: as `export --parquet` runs.
    let mut engine = Engine::new(&t.tables, &t.meta, Config::default());
    let mut file = Vec::new();
    let mut records: Vec<WaitRecord> = Vec::new();
    let trace = TraceRef {
        tables: &t.tables,
        meta: &t.meta,
        start_ns: t.meta.start_ns,
    };
    let summary = {
        let writer = WaitsWriter::new(&mut file, trace, layout).unwrap();
        let mut sinks = (writer, |w: &WaitRecord, _: &_| records.push(w.clone()));
        engine.process(&t.events, &mut sinks);
        engine.finish(&mut sinks);
        sinks.0.finish().unwrap()
    };
    let n = records.len();
    assert!(n > 3 * layout.row_group_rows, "only {n} waits");
    assert_eq!(summary.rows, n as u64);
    assert_eq!(summary.row_groups, n.div_ceil(layout.row_group_rows));
    assert_eq!(
        summary.not_root,
        records.iter().filter(|r| !r.root).count() as u64
    );

    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(file)).unwrap();
    assert_eq!(reader.metadata().num_row_groups(), summary.row_groups);
    let mut i = 0;
    for batch in reader.build().unwrap() {
        let b = batch.unwrap();
        let tid = b.column_by_name("tid").unwrap().as_primitive::<Int64Type>();
        let out = b
            .column_by_name("switch_out_ns")
            .unwrap()
            .as_primitive::<Int64Type>();
        let hops = b.column_by_name("hops").unwrap().as_list::<i32>();
        for row in 0..b.num_rows() {
            let r = &records[i];
            assert_eq!(tid.value(row), i64::from(r.tid), "wait {i}");
            assert_eq!(out.value(row), r.switch_out_ns as i64, "wait {i}");
            assert_eq!(hops.value_length(row) as usize, r.hops.len(), "wait {i}");
            i += 1;
        }
    }
    assert_eq!(i, n);

    // The stacks table: one row per id the waits use, in row groups too.
    let mut stacks = Vec::new();
    let st = write_stacks(&mut stacks, trace, &summary.stacks, layout).unwrap();
    assert_eq!(st.rows, summary.stacks.len() as u64);
    let used: std::collections::BTreeSet<StackId> = records
        .iter()
        .flat_map(|r| {
            let hops = r.hops.iter().flat_map(|h| [h.kstack, h.ustack]);
            [r.kstack, r.ustack].into_iter().chain(hops)
        })
        .collect();
    assert_eq!(summary.stacks, used);
}
