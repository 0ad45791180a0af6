//! The chain graph as a pprof profile (`perftools.profiles.Profile`, gzipped), for fleet
//! profilers that ingest pprof. Each folded line is one sample: its frames become
//! locations (leaf first, as pprof wants: the top of the chain is the leaf), its
//! attributed time the sample value in nanoseconds. `-`/`--` separators are kept as frames
//! so the chain levels stay visible in pprof's flame graph.
//!
//! Field numbers from the published proto/profile.proto of google/pprof.

use crate::{ReportError, Result};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

/// `perftools.profiles.Profile` (the fields we use).
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// sample_type = 1.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// sample = 2.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// location = 4.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// function = 5.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// string_table = 6.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// time_nanos = 9.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// duration_nanos = 10.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// comment = 13.
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// default_sample_type = 14.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `perftools.profiles.ValueType`.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// type = 1 (string index).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// unit = 2 (string index).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `perftools.profiles.Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// location_id = 1 (leaf first).
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// value = 2.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
}

/// `perftools.profiles.Location`.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// id = 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// line = 4.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `perftools.profiles.Line`.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// function_id = 1.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

/// `perftools.profiles.Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// id = 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// name = 2 (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// system_name = 3 (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
}

/// Profile-wide facts.
#[derive(Clone, Debug, Default)]
pub struct ProfileInfo {
    /// Wall-clock start of the recording, ns since the epoch (0 = unknown).
    pub time_nanos: i64,
    /// Length of the recording in ns.
    pub duration_nanos: i64,
    /// Free-form comments (e.g. the command line, lost-event counts).
    pub comments: Vec<String>,
}

/// Builds a profile one folded line at a time (lines may repeat: pprof sums samples).
#[derive(Debug, Default)]
pub struct ProfileBuilder {
    p: Profile,
    string_ix: HashMap<String, i64>,
    loc_of: HashMap<String, u64>,
}

impl ProfileBuilder {
    /// Start a profile.
    pub fn new(info: &ProfileInfo) -> Self {
        let mut b = ProfileBuilder::default();
        b.p.string_table.push(String::new());
        let wait = b.intern("chain");
        let ns = b.intern("nanoseconds");
        b.p.sample_type = vec![ValueType {
            r#type: wait,
            unit: ns,
        }];
        b.p.default_sample_type = wait;
        b.p.time_nanos = info.time_nanos;
        b.p.duration_nanos = info.duration_nanos;
        for c in &info.comments {
            let i = b.intern(c);
            b.p.comment.push(i);
        }
        b
    }

    fn intern(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ix.get(s) {
            return i;
        }
        self.p.string_table.push(s.to_string());
        let i = self.p.string_table.len() as i64 - 1;
        self.string_ix.insert(s.to_string(), i);
        i
    }

    /// Add one folded line (root→leaf) with its weight in nanoseconds (0 is skipped).
    pub fn add(&mut self, stack: &str, ns: u64) -> Result<()> {
        if ns == 0 {
            return Ok(());
        }
        let value = i64::try_from(ns).map_err(|_| ReportError::WeightOverflow(ns))?;
        let mut ids = Vec::new();
        for frame in stack.split(';').rev() {
            let id = match self.loc_of.get(frame) {
                Some(&id) => id,
                None => {
                    let id = self.loc_of.len() as u64 + 1;
                    let name = self.intern(frame);
                    self.p.function.push(Function {
                        id,
                        name,
                        system_name: name,
                    });
                    self.p.location.push(Location {
                        id,
                        line: vec![Line { function_id: id }],
                    });
                    self.loc_of.insert(frame.to_string(), id);
                    id
                }
            };
            ids.push(id);
        }
        self.p.sample.push(Sample {
            location_id: ids,
            value: vec![value],
        });
        Ok(())
    }

    /// The profile (an error when no line had a weight).
    pub fn finish(self) -> Result<Profile> {
        if self.p.sample.is_empty() {
            return Err(ReportError::NothingToExport);
        }
        Ok(self.p)
    }
}

/// Build a profile from folded `(stack root→leaf, nanoseconds)` lines.
pub fn build(folded_ns: &[(String, u64)], info: &ProfileInfo) -> Result<Profile> {
    let mut b = ProfileBuilder::new(info);
    for (stack, w) in folded_ns {
        b.add(stack, *w)?;
    }
    b.finish()
}

/// Write `profile` gzipped (the on-disk pprof format).
pub fn write_gz(profile: &Profile, w: &mut dyn Write) -> Result<()> {
    let io = |e| ReportError::Io {
        path: "<pprof output>".into(),
        source: e,
    };
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec()).map_err(io)?;
    gz.finish().map_err(io)?.flush().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_leaf_first_and_interned() {
        let folded = vec![
            ("a;b;--;c".to_string(), 5u64),
            ("a;b".to_string(), 3),
            ("x".to_string(), 0),
        ];
        let p = build(&folded, &ProfileInfo::default()).unwrap();
        let name = |loc: u64| {
            let f = &p.function[p.location[loc as usize - 1].line[0].function_id as usize - 1];
            p.string_table[f.name as usize].clone()
        };
        assert_eq!(p.sample.len(), 2);
        let s0: Vec<String> = p.sample[0].location_id.iter().map(|&l| name(l)).collect();
        assert_eq!(s0, ["c", "--", "b", "a"]);
        assert_eq!(p.sample[0].value, vec![5]);
        assert_eq!(p.sample[1].location_id, vec![3, 4]);
        assert_eq!(p.location.len(), 4);
        assert_eq!(p.string_table[0], "");
    }
}
