//! The scripts [`MultiModel`](super::multi::MultiModel) sends, as the
//! library sends them (`protocol::script_text`), a mutant's change
//! applied; and the shape of its clients' owner tokens.

use latchkey::protocol::script_text;

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

/// `text` with `from` replaced by `to`; an error when `from` is not there,
/// so that a script's change cannot turn a mutant into the original.
fn mutate(text: &str, from: &str, to: &str) -> Result<String, String> {
    if !text.contains(from) {
        return Err(format!("mutant: {from:?} is no longer in the script"));
    }
    Ok(text.replacen(from, to, 1))
}

impl Scripts {
    pub(crate) fn load(mutant: Option<Mutant>) -> Result<Scripts, String> {
        let text = |file: &str| {
            script_text(file)
                .map(str::to_string)
                .ok_or_else(|| format!("no script {file}"))
        };
        let mut s = Scripts {
            acquire: text("acquire.lua")?,
            extend: text("extend.lua")?,
            release: text("release.lua")?,
            issue_fence: text("issue_fence.lua")?,
            multi_acquire: text("multi_acquire.lua")?,
            multi_extend: text("multi_extend.lua")?,
            multi_release: text("multi_release.lua")?,
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
