//! One module per command family; each is owned by the crate it fronts.
pub mod chains;
pub mod info;
pub mod record;
pub mod report;
pub mod synth;
