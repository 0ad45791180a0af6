//! Query strings (`a=1&b=x%3By`): decoded strictly, so a malformed or unknown parameter
//! is a 400 naming it rather than silently ignored.

/// The decoded parameters of one request, taken one by one; [`Query::finish`] rejects
/// what no handler took.
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A query string the API cannot take (a 400 with this message).
#[derive(Debug)]
pub(crate) struct BadQuery(pub(crate) String);

/// Percent-decode `s` (`+` is a space, as forms send it).
fn decode(s: &str) -> Result<String, BadQuery> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let digit = |j: usize| b.get(j).copied().and_then(hex);
                let (Some(h), Some(l)) = (digit(i + 1), digit(i + 2)) else {
                    return Err(BadQuery(format!("bad %-escape in {s:?}")));
                };
                out.push(h << 4 | l);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| BadQuery(format!("{s:?} is not UTF-8 once decoded")))
}

impl Query {
    /// Parse the part of a URL after `?` (empty: no parameters).
    pub(crate) fn parse(qs: &str) -> Result<Query, BadQuery> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in qs.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let (k, v) = (decode(k)?, decode(v)?);
            if pairs.iter().any(|(seen, _)| *seen == k) {
                return Err(BadQuery(format!("parameter {k:?} given twice")));
            }
            pairs.push((k, v));
        }
        Ok(Query { pairs })
    }

    /// Take parameter `key` (an empty value counts as absent).
    pub(crate) fn take(&mut self, key: &str) -> Option<String> {
        self.take_even_empty(key).filter(|v| !v.is_empty())
    }

    /// Take parameter `key`, an empty value as given (`frame=`: the root frame).
    pub(crate) fn take_even_empty(&mut self, key: &str) -> Option<String> {
        let i = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(i).1)
    }

    /// Take `key` as an unsigned integer.
    pub(crate) fn u64(&mut self, key: &str) -> Result<Option<u64>, BadQuery> {
        self.take(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| BadQuery(format!("{key}={v:?}: want a non-negative integer")))
            })
            .transpose()
    }

    /// An error naming the parameters nobody took.
    pub(crate) fn finish(self) -> Result<(), BadQuery> {
        match self.pairs.first() {
            None => Ok(()),
            Some((k, _)) => Err(BadQuery(format!("unknown parameter {k:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_rejects() {
        let mut q = Query::parse("frame=a%3Bb+c&from=10&x=").unwrap();
        assert_eq!(q.take("frame").as_deref(), Some("a;b c"));
        assert_eq!(q.u64("from").unwrap(), Some(10));
        assert_eq!(q.take("x"), None);
        q.finish().unwrap();
        for bad in ["a=%", "a=%4", "a=%zz", "a=%ff", "a=1&a=2"] {
            assert!(Query::parse(bad).is_err(), "{bad}");
        }
        assert!(Query::parse("from=-1").unwrap().u64("from").is_err());
        assert!(Query::parse("nope=1").unwrap().finish().is_err());
    }
}
