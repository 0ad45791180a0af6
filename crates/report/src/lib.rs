//! chainrec-report (in progress).
