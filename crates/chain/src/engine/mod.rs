//! Layer 1, the engine: events in, one [`record::WaitRecord`] per off-CPU interval out,
//! interning chain nodes into a [`nodes::NodeTable`]. Knows nothing of paths or views.

pub(crate) mod config;
pub(crate) mod dedup;
pub(crate) mod emit;
pub(crate) mod explain;
pub(crate) mod filter;
pub(crate) mod frames;
pub(crate) mod hops;
pub(crate) mod ids;
pub(crate) mod machine;
pub(crate) mod mode;
pub(crate) mod nodes;
pub(crate) mod past;
pub(crate) mod record;
pub(crate) mod runqueue;
pub(crate) mod sampleidx;
pub(crate) mod search;
pub(crate) mod stats;
pub(crate) mod tasks;
pub(crate) mod walk;
