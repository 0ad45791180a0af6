//! chainrec-testkit: the scaffolding every test suite of the workspace shares, so that each
//! exists once: event builders ([`events`]), scratch directories ([`scratch`]), the gate of
//! real-kernel tests ([`bpf`]), bpftrace as the reference for
//! waits and wakers ([`bpftrace`]), golden files ([`golden`]), synthetic scenarios as traces ([`scenario`]), a headless
//! chromium driven over the DevTools protocol ([`devtools`]) and the gate of tests that
//! read exports with third-party tools ([`tools`]), and section headers patched
//! on purpose ([`sections`]).
//!
//! A dev-dependency only (`publish = false`): nothing here ships in chainrec.

pub mod bpf;
pub mod bpftrace;
pub mod devtools;
pub mod events;
pub mod flat_tree;
pub mod golden;
pub mod scenario;
pub mod scratch;
pub mod sections;
pub mod tools;
