//! `chainrec top|heatmap|export|demo` (fronts chainrec-report).
use anyhow::{bail, Context, Result};

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

/// Render folded lines as an interactive flame-graph SVG at `path` (used by `--svg` of
/// chains/offcpu/wakeup/offwake). `chain_layout` turns on per-level hues and `--`
/// separators as in CHAINS.md; `unit` is the weight unit (`us`, `ns`, `ms`).
pub fn render_svg(
    folded: &[(String, u64)],
    title: &str,
    unit: &str,
    chain_layout: bool,
    path: &std::path::Path,
) -> Result<()> {
    let opts = chainrec_report::svg::SvgOptions::new(title, unit, chain_layout);
    let mut buf = Vec::new();
    let stats = chainrec_report::svg::render(folded, &opts, &mut buf)
        .with_context(|| format!("drawing {}", path.display()))?;
    std::fs::write(path, &buf).with_context(|| format!("writing {}", path.display()))?;
    if stats.zero_weight_lines > 0 {
        eprintln!(
            "chainrec: {} stacks with zero weight not drawn",
            stats.zero_weight_lines
        );
    }
    Ok(())
}
