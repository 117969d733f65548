//! The scripts [`MultiModel`](super::multi::MultiModel) sends, as the
//! library sends them (`protocol::script_text`), a mutant's change
//! applied; and the shape of its clients' owner tokens.

use crate::model::common::{mutate, script};
use crate::model::multi::Mutant;

/// The scripts' texts as the library sends them, a mutant's change applied.
pub(crate) struct Scripts {
    pub(crate) acquire: String,
    pub(crate) extend: String,
    pub(crate) release: String,
    pub(crate) issue_fence: String,
    pub(crate) multi_acquire: String,
    pub(crate) multi_extend: String,
    pub(crate) multi_release: String,
}

impl Scripts {
    pub(crate) fn load(mutant: Option<Mutant>) -> Result<Scripts, String> {
        let mut s = Scripts {
            acquire: script("acquire.lua")?,
            extend: script("extend.lua")?,
            release: script("release.lua")?,
            issue_fence: script("issue_fence.lua")?,
            multi_acquire: script("multi_acquire.lua")?,
            multi_extend: script("multi_extend.lua")?,
            multi_release: script("multi_release.lua")?,
        };
        match mutant {
            Some(Mutant::PartialAcquire) => {
                // Each free key is taken while looking, before a busy one
                // is found: `SET … NX … GET` answers the old holder as GET did.
                s.multi_acquire = mutate(
                    &s.multi_acquire,
                    "local holder = redis.pcall('GET', key)",
                    "local holder = redis.pcall('SET', key, ARGV[1], 'NX', 'PX', ARGV[2], 'GET')",
                )?;
            }
            Some(Mutant::ReleaseLeavesOne) => {
                s.multi_release = mutate(
                    &s.multi_release,
                    "for i = 1, #KEYS do\n  local holder = holders[i]",
                    "for i = 1, #KEYS - 1 do\n  local holder = holders[i]",
                )?;
            }
            Some(Mutant::MultiWaiterTellsNoKeeper) => {
                s.multi_acquire = mutate(
                    &s.multi_acquire,
                    "mark_busy(key, holder, ARGV[4], ARGV[5 + i], ARGV[5])",
                    "mark_busy(key, holder, ARGV[4], nil, ARGV[5])",
                )?;
            }
            Some(Mutant::TakerMarksNothing) => {
                s.acquire = mutate(
                    &s.acquire,
                    "mark_busy(KEYS[1], ARGV[1], '1', ARGV[6], ARGV[7])",
                    "local _ = others",
                )?;
            }
            Some(Mutant::KeeperIgnoresWanted | Mutant::HolderIgnoresRequest) | None => {}
        }
        Ok(s)
    }
}

/// Client `c`'s token of `attempt`, in a library token's shape (`lk2:`,
/// so that waiters mark it; a keeper's ends in the caching mark `:c`).
pub(crate) fn token(c: usize, attempt: u32, caching: bool) -> String {
    let mark = if caching { ":c" } else { "" };
    format!("lk2:c{c}a{attempt}:0:sim{mark}")
}

/// Whose token a lock key holds (a waiter's `+w` may follow it).
pub(crate) fn token_owner(value: &[u8]) -> Option<(usize, u32)> {
    let text = std::str::from_utf8(value).ok()?.strip_prefix("lk2:c")?;
    let (c, rest) = text.split_once('a')?;
    let (a, _) = rest.split_once(':')?;
    Some((c.parse().ok()?, a.parse().ok()?))
}
