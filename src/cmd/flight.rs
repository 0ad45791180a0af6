//! `record --flight` / `--rotate`: the options (checked by
//! `chainrec_record::request::FlightRequest`).
use chainrec_record::request::FlightRequest;

const FLIGHT: &str = "Flight recorder and rotation";

/// Where `record` keeps what it records, besides one file.
#[derive(clap::Args, Debug, Default)]
pub struct FlightArgs {
    /// Flight recorder: keep the last DURATION (e.g. 30s) in memory and write nothing
    /// until a --trigger fires, SIGUSR1 arrives or recording stops (each writes a dump
    /// named `OUTPUT-<UTC time>-<tid>.zst`, -o being the prefix).
    #[arg(help_heading = FLIGHT, long, value_name = "DURATION")]
    pub flight: Option<String>,
    /// Flight recorder: at most this much memory for the kept events and their tables,
    /// dropping the oldest first [default: 256M].
    #[arg(help_heading = FLIGHT, long, value_name = "SIZE")]
    pub flight_size: Option<String>,
    /// Dump when a wait is too long: `wait>50ms` (a thread that blocked is off CPU that
    /// long, switch-out to switch-in, its run-queue time after the waking included) or
    /// `runqueue>10ms` (runnable, waiting for a CPU); repeatable.
    #[arg(help_heading = FLIGHT, long, value_name = "RULE")]
    pub trigger: Vec<String>,
    /// After a trigger, keep recording this long before writing the dump [default: 2s].
    #[arg(help_heading = FLIGHT, long, value_name = "DURATION")]
    pub post: Option<String>,
    /// At most this many trigger dumps [default: 10].
    #[arg(help_heading = FLIGHT, long, value_name = "N")]
    pub max_dumps: Option<u32>,
    /// At least this long between triggers that dump [default: 10s].
    #[arg(help_heading = FLIGHT, long, value_name = "DURATION")]
    pub min_interval: Option<String>,
    /// Stop dumping on triggers once the dumps hold this much [default: 1G].
    #[arg(help_heading = FLIGHT, long, value_name = "SIZE")]
    pub dump_quota: Option<String>,
    /// Triggers: only threads whose name matches this regex.
    #[arg(help_heading = FLIGHT, long, value_name = "REGEX")]
    pub comm: Option<String>,
    /// Triggers: only these threads; repeat or comma-separate.
    #[arg(help_heading = FLIGHT, short = 't', long = "tid", value_delimiter = ',', value_name = "TID")]
    pub tids: Vec<u32>,
    /// Triggers (`wait` rules): only waits whose switch-out state has a bit of MASK
    /// (2 = D, 1 = S), decimal or 0x hex.
    #[arg(help_heading = FLIGHT, long, value_name = "MASK", value_parser = super::filter::parse_mask)]
    pub state: Option<u32>,
    /// Write numbered complete files (`OUTPUT.0000.zst`, ...), starting the next one after
    /// SIZE (`1G`, upper-case unit) or DURATION (`10m`, `30s`, lower-case unit).
    #[arg(help_heading = FLIGHT, long, value_name = "SIZE|DURATION", conflicts_with = "flight")]
    pub rotate: Option<String>,
}

impl FlightArgs {
    /// The options as the library checks them.
    pub fn request(&self) -> FlightRequest {
        FlightRequest {
            flight: self.flight.clone(),
            flight_size: self.flight_size.clone(),
            trigger: self.trigger.clone(),
            post: self.post.clone(),
            max_dumps: self.max_dumps,
            min_interval: self.min_interval.clone(),
            dump_quota: self.dump_quota.clone(),
            comm: self.comm.clone(),
            tids: self.tids.clone(),
            state: self.state,
            rotate: self.rotate.clone(),
        }
    }
}
