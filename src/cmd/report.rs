//! `chainrec top|heatmap|export|demo` (fronts chainrec-report).
use anyhow::{bail, Result};

#[derive(clap::Args)]
pub struct TopArgs {}
#[derive(clap::Args)]
pub struct HeatmapArgs {}
#[derive(clap::Args)]
pub struct ExportArgs {}
#[derive(clap::Args)]
pub struct DemoArgs {}

pub fn run_top(_a: TopArgs) -> Result<()> {
    bail!("top: not implemented yet")
}
pub fn run_heatmap(_a: HeatmapArgs) -> Result<()> {
    bail!("heatmap: not implemented yet")
}
pub fn run_export(_a: ExportArgs) -> Result<()> {
    bail!("export: not implemented yet")
}
pub fn run_demo(_a: DemoArgs) -> Result<()> {
    bail!("demo: not implemented yet")
}
