//! Where a key lives in a Redis Cluster: its hash slot (CRC16 of the key, or of its hash tag,
//! modulo 16384) and the slot map, which names the primary serving each slot. Pure: the map
//! is read from a `CLUSTER SLOTS` reply that the transport fetched.

use redis::Value;

/// The number of hash slots of a Redis Cluster.
pub(crate) const SLOTS: usize = 16384;

/// The hash slot of `key`: of the part between the first `{` and the next `}` when that
/// part is not empty (the hash tag), else of the whole key.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS as u16
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as the cluster specification
/// defines it.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// An address: host and port.
pub(crate) type Addr = (String, u16);

/// Which primary serves each slot, as the cluster last told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotMap {
    /// The primaries named in the map, each once.
    primaries: Vec<Addr>,
    /// For each slot, an index into `primaries`, or `None` when no primary serves it.
    owners: Vec<Option<u16>>,
}

impl SlotMap {
    /// Reads a `CLUSTER SLOTS` reply. Each entry is `[start, end, [host, port, id, ..],
    /// replicas..]`; a host that is empty or `?` means the server that was asked, whose host
    /// is `asked_host`. `None` when the reply does not have that shape.
    pub fn from_cluster_slots(reply: Value, asked_host: &str) -> Option<SlotMap> {
        let mut map = SlotMap {
            primaries: Vec::new(),
            owners: vec![None; SLOTS],
        };
        let Value::Array(entries) = reply else {
            return None;
        };
        for entry in entries {
            let Value::Array(fields) = entry else {
                return None;
            };
            let mut fields = fields.into_iter();
            let start = int(fields.next()?)?;
            let end = int(fields.next()?)?;
            let Value::Array(primary) = fields.next()? else {
                return None;
            };
            let mut primary = primary.into_iter();
            let host = text(primary.next()?)?;
            let port = u16::try_from(int(primary.next()?)?).ok()?;
            let host = match host.as_str() {
                "" | "?" => asked_host.to_owned(),
                _ => host,
            };
            if start > end || end >= SLOTS as i64 || start < 0 {
                return None;
            }
            let index = map.index_of((host, port));
            for slot in start..=end {
                map.owners[slot as usize] = Some(index);
            }
        }
        Some(map)
    }

    /// The primary serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&Addr> {
        let index = (*self.owners.get(usize::from(slot))?)?;
        self.primaries.get(usize::from(index))
    }

    /// Records that `addr` serves `slot` now, as a `MOVED` reply said.
    pub fn moved(&mut self, slot: u16, addr: Addr) {
        if self.owners.len() != SLOTS {
            self.owners = vec![None; SLOTS];
        }
        let index = self.index_of(addr);
        self.owners[usize::from(slot)] = Some(index);
    }

    /// The primaries that serve at least one slot.
    pub fn primaries(&self) -> impl Iterator<Item = &Addr> {
        let mut serving = vec![false; self.primaries.len()];
        for index in self.owners.iter().flatten() {
            serving[usize::from(*index)] = true;
        }
        (self.primaries.iter().zip(serving)).filter_map(|(addr, serves)| serves.then_some(addr))
    }

    /// Whether every slot has a primary.
    pub fn is_complete(&self) -> bool {
        self.owners.len() == SLOTS && self.owners.iter().all(Option::is_some)
    }

    fn index_of(&mut self, addr: Addr) -> u16 {
        match self.primaries.iter().position(|known| *known == addr) {
            Some(i) => i as u16,
            None => {
                self.primaries.push(addr);
                (self.primaries.len() - 1) as u16
            }
        }
    }
}

fn int(value: Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(n),
        _ => None,
    }
}

fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(text) => Some(text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_those_of_the_cluster_specification() {
        // The specification's check value: CRC16 of "123456789" is 0x31C3.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"123456789"), 0x31C3);
        // Examples from the Redis documentation of CLUSTER KEYSLOT.
        assert_eq!(slot(b"somekey"), 11058);
        assert_eq!(slot(b"foo{hash_tag}"), 2515);
        assert_eq!(slot(b"bar{hash_tag}"), 2515);
    }

    #[test]
    fn a_hash_tag_is_the_first_non_empty_braces() {
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
        assert_eq!(slot(b"no}tag{"), crc16(b"no}tag{") % 16384);
    }

    fn entry(start: i64, end: i64, host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ]),
            Value::Array(vec![
                Value::BulkString(b"10.0.0.9".to_vec()),
                Value::Int(7000),
            ]),
        ])
    }

    #[test]
    fn a_slot_map_names_each_slot_s_primary() {
        let reply = Value::Array(vec![
            entry(0, 5460, "10.0.0.1", 7001),
            entry(5461, 10922, "", 7002),
            entry(10923, 16383, "10.0.0.1", 7001),
        ]);
        let mut map = SlotMap::from_cluster_slots(reply, "10.0.0.2").unwrap();
        assert!(map.is_complete());
        assert_eq!(map.owner(0), Some(&("10.0.0.1".into(), 7001)));
        assert_eq!(map.owner(5461), Some(&("10.0.0.2".into(), 7002)));
        assert_eq!(map.owner(16383), Some(&("10.0.0.1".into(), 7001)));
        assert_eq!(map.primaries().count(), 2);
        map.moved(0, ("10.0.0.3".into(), 7003));
        assert_eq!(map.owner(0), Some(&("10.0.0.3".into(), 7003)));
        assert_eq!(map.primaries().count(), 3);
    }

    #[test]
    fn a_partial_or_malformed_map_is_told_apart() {
        let partial =
            SlotMap::from_cluster_slots(Value::Array(vec![entry(0, 100, "h", 1)]), "h").unwrap();
        assert!(!partial.is_complete());
        assert_eq!(partial.owner(101), None);
        assert_eq!(SlotMap::from_cluster_slots(Value::Nil, "h"), None);
        assert_eq!(
            SlotMap::from_cluster_slots(Value::Array(vec![entry(5, 16384, "h", 1)]), "h"),
            None
        );
    }
}
