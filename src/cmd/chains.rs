//! `chainrec chains|offcpu|wakeup|offwake` (fronts chainrec-chain).
use anyhow::{bail, Result};

/// Which single-level view.
pub enum View {
    OffCpu,
    Wakeup,
    OffWake,
}
/// Arguments of `chainrec chains`.
#[derive(clap::Args)]
pub struct ChainsArgs {}
/// Arguments of the single-level views.
#[derive(clap::Args)]
pub struct ViewArgs {}

pub fn run_chains(_a: ChainsArgs) -> Result<()> {
    bail!("chains: not implemented yet")
}
pub fn run_view(_v: View, _a: ViewArgs) -> Result<()> {
    bail!("view: not implemented yet")
}
