//! `chainrec record` and `chainrec workload` (fronts chainrec-record).
use anyhow::{bail, Result};

/// Arguments of `chainrec record`.
#[derive(clap::Args)]
pub struct Args {}
/// Arguments of `chainrec workload`.
#[derive(clap::Args)]
pub struct WorkloadArgs {}

pub fn run(_a: Args) -> Result<()> {
    bail!("record: not implemented yet")
}
pub fn run_workload(_a: WorkloadArgs) -> Result<()> {
    bail!("workload: not implemented yet")
}
