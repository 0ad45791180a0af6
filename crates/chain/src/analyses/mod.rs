//! Layer 3, analyses built on the engine and the graph: one thread's critical path, and
//! on-CPU folding.

pub(crate) mod critpath;
pub(crate) mod oncpu;
