//! Layer 2, the chain graph: wait records folded into a path trie over the engine's
//! nodes, views, frame naming and rendering to folded lines. Imports only the engine.

pub(crate) mod finished;
pub(crate) mod folded;
pub(crate) mod pathframes;
pub(crate) mod paths;
pub(crate) mod render;
pub(crate) mod spill;
pub(crate) mod trie;
pub(crate) mod views;
pub(crate) mod waits;
