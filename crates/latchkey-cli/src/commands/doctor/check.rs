//! One line of `latchkey doctor`: a verdict (PASS, WARN, FAIL), the check's
//! name, the reason and the fix. Its own module so that the checks (in
//! the other files of `doctor/`) need nothing else of `mod.rs`.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Pass,
    Warn,
    Fail,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Level::Pass => "PASS",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        })
    }
}

pub struct Check {
    pub(crate) level: Level,
    name: &'static str,
    pub(crate) reason: String,
    fix: Option<String>,
}

impl Check {
    pub fn pass(name: &'static str, reason: impl Into<String>) -> Check {
        Check {
            level: Level::Pass,
            name,
            reason: reason.into(),
            fix: None,
        }
    }

    pub fn warn(name: &'static str, reason: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            level: Level::Warn,
            name,
            reason: reason.into(),
            fix: Some(fix.into()),
        }
    }

    /// A pass when `fine`, otherwise a warning: `reason`, then what is
    /// wrong with it (`trouble`), and the `fix`.
    pub fn warn_unless(
        fine: bool,
        name: &'static str,
        reason: String,
        (trouble, fix): (&str, &str),
    ) -> Check {
        match fine {
            true => Check::pass(name, reason),
            false => Check::warn(name, format!("{reason}: {trouble}"), fix),
        }
    }

    pub fn fail(name: &'static str, reason: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            level: Level::Fail,
            name,
            reason: reason.into(),
            fix: Some(fix.into()),
        }
    }

    pub(crate) fn print(&self) {
        let fix = self
            .fix
            .as_ref()
            .map(|f| format!(". Fix: {f}"))
            .unwrap_or_default();
        println!("{:<4}  {:<12}  {}{fix}", self.level, self.name, self.reason);
    }
}
