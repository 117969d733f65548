//! The widths of `top`'s flexible columns (NAME and HOLDER) and how a
//! holder is cut to fit: apart from the screen (`view.rs`) because both
//! depend on the terminal's width, not on what a row means.

/// Width of every column but NAME (HOLDER: its least), and the space between columns.
pub(super) const KIND: u16 = 9;
pub(super) const HOLDER: u16 = 18;
pub(super) const AGE: u16 = 7;
pub(super) const TTL: u16 = 7;
pub(super) const FENCE: u16 = 16;
pub(super) const WAIT: u16 = 4;
pub(super) const SPACING: u16 = 1;

/// The NAME and HOLDER widths for a table `width` wide: HOLDER at least
/// [`HOLDER`], and as wide as its longest cell up to half of what the other
/// columns leave; NAME the rest.
pub(super) fn widths<'a>(width: u16, holders: impl Iterator<Item = &'a str>) -> (u16, u16) {
    let fixed = KIND + AGE + TTL + FENCE + WAIT + 6 * SPACING;
    let left = width.saturating_sub(fixed);
    let longest = holders
        .map(|h| u16::try_from(h.chars().count()).unwrap_or(u16::MAX))
        .max()
        .unwrap_or(0);
    let holder = longest.min(left / 2).max(HOLDER);
    (left.saturating_sub(holder).max(4), holder)
}

/// A HOLDER cell cut to `width`: the host name gives way first, so that
/// `pid N` (and what follows it) stays whole: `a-very-lo… pid 28483`.
pub(super) fn cut_holder(text: &str, width: u16) -> String {
    let width = usize::from(width);
    if text.chars().count() <= width {
        return text.to_owned();
    }
    if let Some(at) = text.find(" pid ") {
        let (host, tail) = text.split_at(at);
        let room = width.saturating_sub(tail.chars().count());
        if room >= 4 {
            return format!("{}{tail}", crate::support::text::cut(host, room));
        }
    }
    crate::support::text::cut(text, width)
}

#[cfg(test)]
mod tests {
    use super::cut_holder;

    #[test]
    fn a_holder_is_cut_in_its_host_name() {
        assert_eq!(cut_holder("web-1 pid 4242", 18), "web-1 pid 4242");
        assert_eq!(
            cut_holder("build-agent-42.eu-west-1.internal pid 28483", 18),
            "build-a… pid 28483"
        );
        // Where there is no pid to keep: the usual `…`.
        assert_eq!(
            cut_holder("2 reader(s) +1 writer(s) waiting", 18),
            "2 reader(s) +1 wr…"
        );
    }
}
