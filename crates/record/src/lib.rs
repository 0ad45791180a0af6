//! chainrec-record (in progress).
