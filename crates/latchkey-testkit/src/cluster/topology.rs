//! What a cluster node says about the cluster: hash slots of keys, and the
//! node table of `CLUSTER NODES`.

/// The number of hash slots of a Redis Cluster; every key maps to one.
pub const SLOTS: u16 = 16_384;

/// The hash slot of `key`, as Redis Cluster computes it: CRC16 (XMODEM) of
/// the key modulo 16384, where a key with a *hash tag* hashes only the tag.
///
/// The tag is what lies between the first `{` and the first `}` after it, if
/// that is not empty; so `{user}.lock` and `{user}.fence` share a slot, while
/// `a{}b` and `{}{a}` hash whole (their first tag is empty) and `a{b` has no
/// tag at all. This is `CLUSTER KEYSLOT`, without asking a server.
///
/// ```
/// use latchkey_testkit::key_slot;
///
/// assert_eq!(key_slot(b"foo"), 12182);
/// assert_eq!(key_slot(b"{foo}.fence"), key_slot(b"foo"));
/// assert_ne!(key_slot(b"a{}b"), key_slot(b""));
/// ```
pub fn key_slot(key: &[u8]) -> u16 {
    crc16_xmodem(hash_tag(key).unwrap_or(key)) % SLOTS
}

/// The non-empty text between the first `{` and the first `}` after it.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let len = rest.iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &rest[..len])
}

/// CRC16 with polynomial 0x1021 and initial value 0 (XMODEM), bit by bit:
/// keys are short, and a table would be 512 bytes of noise.
fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
    }
    crc
}

/// One line of `CLUSTER NODES`, as far as the test kit cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: String,
    /// The client port; 0 for a node whose address is not known yet.
    pub(crate) port: u16,
    /// The primary's id, for a replica; `None` for a primary.
    pub(crate) primary: Option<String>,
    /// Slot ranges served, inclusive.
    pub(crate) slots: Vec<(u16, u16)>,
    /// Slots being migrated or imported, e.g. `[42->-<id>]` (only on the
    /// line of the node that answered).
    pub(crate) open_slots: Vec<String>,
    /// The answering node itself.
    pub(crate) myself: bool,
    /// Still being introduced (`handshake`) or without an address (`noaddr`).
    pub(crate) joining: bool,
    /// Flagged `fail` or `fail?` by the answering node.
    pub(crate) failing: bool,
}

impl Entry {
    /// Whether this node serves `slot`.
    pub(crate) fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(lo, hi)| (lo..=hi).contains(&slot))
    }

    /// What every node should agree on: who is who, who replicates whom,
    /// who serves which slots. Not liveness, which differs by observer.
    fn agreed(&self) -> Agreed<'_> {
        (&self.id, self.port, self.primary.as_deref(), &self.slots)
    }
}

/// What [`Entry::agreed`] compares: id, port, primary, slots.
type Agreed<'a> = (&'a str, u16, Option<&'a str>, &'a [(u16, u16)]);

/// A node's view of the cluster: its `CLUSTER NODES` table.
#[derive(Clone, Debug)]
pub(crate) struct View(pub(crate) Vec<Entry>);

impl View {
    /// Parses the reply of `CLUSTER NODES`.
    pub(crate) fn parse(text: &str) -> Result<View, String> {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(parse_line)
            .collect::<Result<_, _>>()
            .map(View)
    }

    /// The node serving `slot`, if any.
    pub(crate) fn owner(&self, slot: u16) -> Option<&Entry> {
        self.0
            .iter()
            .find(|e| e.primary.is_none() && e.serves(slot))
    }

    /// The entry with `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&Entry> {
        self.0.iter().find(|e| e.id == id)
    }

    /// Whether two views agree on roles, replication and slots.
    pub(crate) fn agrees_with(&self, other: &View) -> bool {
        self.agreed() == other.agreed()
    }

    fn agreed(&self) -> Vec<Agreed<'_>> {
        let mut agreed: Vec<_> = self.0.iter().map(Entry::agreed).collect();
        agreed.sort_unstable();
        agreed
    }
}

fn parse_line(line: &str) -> Result<Entry, String> {
    let bad = |what: &str| format!("bad CLUSTER NODES line ({what}): {line:?}");
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return Err(bad("fewer than 8 fields"));
    }
    // "127.0.0.1:7000@17000" (Redis 7 may append ",hostname"); ":0@0" when unknown.
    let port = fields[1]
        .split(['@', ','])
        .next()
        .and_then(|addr| addr.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .ok_or_else(|| bad("address"))?;
    let flags: Vec<&str> = fields[2].split(',').collect();
    let has = |flag: &str| flags.contains(&flag);
    let primary = match (has("slave"), fields[3]) {
        (false, _) => None,
        (true, "-") => return Err(bad("replica without a primary")),
        (true, id) => Some(id.to_owned()),
    };
    let mut slots = Vec::new();
    let mut open_slots = Vec::new();
    for field in &fields[8..] {
        if field.starts_with('[') {
            open_slots.push((*field).to_owned());
            continue;
        }
        let (lo, hi) = field.split_once('-').unwrap_or((field, field));
        let range = lo.parse().and_then(|lo| Ok((lo, hi.parse()?)));
        slots.push(range.map_err(|_| bad("slot range"))?);
    }
    Ok(Entry {
        id: fields[0].to_owned(),
        port,
        primary,
        slots,
        open_slots,
        myself: has("myself"),
        joining: has("handshake") || has("noaddr"),
        failing: has("fail") || has("fail?"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_known_values_and_the_hash_tag_rule() {
        // The CRC16 check value from the Redis Cluster spec: "123456789" -> 0x31C3.
        assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"123456789"), 0x31C3 % SLOTS);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16_xmodem(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"a{b"), crc16_xmodem(b"a{b") % SLOTS);
    }

    #[test]
    fn parses_cluster_nodes() {
        let text = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
e7d1 127.0.0.1:30001@40001,host myself,master - 0 0 1 connected 0-5460 7000 [5461-<-292f]
292f :0@0 master,fail?,noaddr - 1426238316232 1426238315228 3 disconnected
";
        let view = View::parse(text).unwrap();
        let [replica, me, other] = &view.0[..] else {
            panic!("three entries expected: {view:?}")
        };
        assert_eq!(replica.primary.as_deref(), Some("e7d1"));
        assert_eq!(replica.port, 30004);
        assert!(me.myself && me.primary.is_none());
        assert_eq!(me.slots, [(0, 5460), (7000, 7000)]);
        assert_eq!(me.open_slots, ["[5461-<-292f]"]);
        assert!(other.joining && other.failing && other.port == 0);
        assert_eq!(view.owner(7000).map(|e| e.id.as_str()), Some("e7d1"));
        assert!(view.owner(5461).is_none());
        assert!(View::parse("x y").is_err());
    }
}
