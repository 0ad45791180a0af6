//! chainrec-chain (in progress).
