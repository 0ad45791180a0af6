//! Where reports read events from, and who each thread is: both live in
//! `chainrec-format` ([`EventSource`], [`Threads`]), next to the readers that implement
//! them; re-exported here for the report modules.

pub use chainrec_format::{EventSource, Threads};

pub use chainrec_format::format_wall;

#[cfg(test)]
mod tests {
    #[test]
    fn wall_clock_format() {
        assert_eq!(super::format_wall(0), "1970-01-01 00:00:00.000 UTC");
        // 2026-11-21 19:47:07.250 UTC
        assert_eq!(
            super::format_wall(1_795_290_427_250_000_000),
            "2026-11-21 19:47:07.250 UTC"
        );
        assert_eq!(
            super::format_wall(951_782_400_000_000_000),
            "2000-02-29 00:00:00.000 UTC"
        );
    }
}
