//! The screen of `latchkey top`, drawn from a [`Snapshot`]: a pure function
//! of its input, so tests draw it on a ratatui `TestBackend`.
//!
//! ```text
//! latchkey top · 127.0.0.1:6379 · prefix latchkey: · pattern *
//! 3 active, 1 longer than 5m00s
//! NAME          KIND      HOLDER             AGE     TTL     FENCING TOKEN    WAIT
//! nightly-rep…  lock      web-1 pid 4242     12m03s  27.2s   1718000000000123    2
//! jobs          semaphore 3 permits          41.20s  18.8s   -                   -
//! q quit · every 1s · red: held longer than 5m00s
//! ```
//!
//! Every kind is shown while active (held, waited for, a latch not yet
//! open, a barrier with parties arrived, an election with a leader). Fits
//! 80 columns: the fixed columns take 49, HOLDER at least 18 and the name
//! the rest; a wider terminal gives HOLDER up to half of what is left. A
//! cell too long is cut with `…`; a holder is cut in its host name, so its
//! pid stays readable.

use std::collections::HashMap;
use std::time::Duration;

use latchkey::inspect::PrimitiveInfo;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow, Table};
use ratatui::Frame;

use super::cells::{cut_holder, widths, AGE, FENCE, KIND, SPACING, TTL, WAIT};
use crate::support::duration::human;

/// Everything one screen shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The server, for the title.
    pub server: String,
    pub prefix: String,
    pub pattern: String,
    pub refresh: Duration,
    pub long_held: Duration,
    /// Active primitives, oldest first (unknown ages last).
    pub rows: Vec<Row>,
    /// Why the last refresh failed, while the rows are from an older one.
    pub error: Option<String>,
}

/// One active primitive.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    /// `lock`, `semaphore`, … ([`latchkey::Kind::as_str`]).
    pub kind: String,
    /// `host pid N`, `other client` for a value that is not a latchkey
    /// token, or what the kind holds (`3 permits`, `count 2`, …).
    pub holder: String,
    pub age: Option<Duration>,
    /// `None`: held without a TTL (another client's key).
    pub ttl: Option<Duration>,
    pub fencing_token: Option<u64>,
    /// The fencing counter holds something other than a token (shown as
    /// `invalid`; `list` names the key to delete).
    pub bad_fence: bool,
    /// Processes waiting for a lock: the connections subscribed to its
    /// release channel but the holder's own (a latchkey holder listens
    /// there for revocations and release requests); `None` when unknown,
    /// and for the other kinds.
    pub waiters: Option<u64>,
}

impl Row {
    pub fn is_long_held(&self, threshold: Duration) -> bool {
        self.age.is_some_and(|age| age > threshold)
    }
}

impl Snapshot {
    /// The active primitives among `infos`, sorted oldest first; `waiters`
    /// by lock name.
    pub fn rows_of(infos: &[PrimitiveInfo], waiters: &HashMap<Vec<u8>, u64>) -> Vec<Row> {
        let mut rows: Vec<Row> = infos
            .iter()
            .filter(|info| info.is_active())
            .map(|info| {
                let lock = match info {
                    PrimitiveInfo::Lock(lock) => Some(lock),
                    PrimitiveInfo::FairLock(fair) => Some(&fair.lock),
                    _ => None,
                };
                Row {
                    // Escaped: a name or host with a newline or ESC would
                    // otherwise reach the terminal.
                    name: crate::support::text::escape(info.name()),
                    kind: info.kind().to_string(),
                    holder: match lock {
                        Some(lock) if lock.holder.is_none() => "other client".to_owned(),
                        _ => crate::support::kind_view::holder_cell(info),
                    },
                    age: info.oldest().map(|(_, age)| age),
                    ttl: crate::support::kind_view::ttl(info),
                    fencing_token: crate::support::kind_view::fence(info),
                    bad_fence: lock.is_some_and(|l| l.bad_fencing_counter.is_some()),
                    waiters: lock.and_then(|l| {
                        let subscribed = waiters.get(&l.name).copied()?;
                        // The holder's connection listens on the channel too.
                        let holder_listens = u64::from(l.holder.is_some());
                        Some(subscribed.saturating_sub(holder_listens))
                    }),
                }
            })
            .collect();
        sort_oldest_first(&mut rows);
        rows
    }
}

/// Oldest first; locks of unknown age after all others; then by name.
fn sort_oldest_first(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        b.age
            .is_some()
            .cmp(&a.age.is_some())
            .then(b.age.cmp(&a.age))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// Draws the whole screen.
pub fn render(frame: &mut Frame, snapshot: &Snapshot) {
    let [title, summary, table, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let title_text = format!(
        "latchkey top · {} · prefix {} · pattern {}",
        snapshot.server, snapshot.prefix, snapshot.pattern
    );
    frame.render_widget(
        Line::from(title_text).style(Style::new().add_modifier(Modifier::BOLD)),
        title,
    );

    let long = snapshot
        .rows
        .iter()
        .filter(|r| r.is_long_held(snapshot.long_held))
        .count();
    let summary_line = match &snapshot.error {
        Some(error) => Line::from(Span::styled(
            format!("refresh failed, showing the last view: {error}"),
            Style::new().fg(Color::Red),
        )),
        None => Line::from(format!(
            "{} active, {long} longer than {}",
            snapshot.rows.len(),
            human(snapshot.long_held)
        )),
    };
    frame.render_widget(summary_line, summary);

    let holders = snapshot.rows.iter().map(|r| r.holder.as_str());
    let (name_width, holder_width) = widths(table.width, holders);
    let visible = usize::from(table.height.saturating_sub(1));
    let header = TableRow::new(
        [
            "NAME",
            "KIND",
            "HOLDER",
            "AGE",
            "TTL",
            "FENCING TOKEN",
            "WAIT",
        ]
        .map(Cell::from),
    )
    .style(Style::new().add_modifier(Modifier::REVERSED));
    let rows: Vec<TableRow> = if snapshot.rows.is_empty() {
        // Across the whole width, under the header (a cell would be cut
        // to the name column).
        let below_header = ratatui::layout::Rect {
            y: table.y.saturating_add(1),
            height: table.height.saturating_sub(1).min(1),
            ..table
        };
        frame.render_widget(
            Line::from(format!("nothing active matches {}", snapshot.pattern)),
            below_header,
        );
        Vec::new()
    } else {
        snapshot
            .rows
            .iter()
            .map(|row| {
                let style = if row.is_long_held(snapshot.long_held) {
                    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
                } else {
                    Style::new()
                };
                TableRow::new([
                    Cell::from(truncate(&row.name, name_width)),
                    Cell::from(truncate(&row.kind, KIND)),
                    Cell::from(cut_holder(&row.holder, holder_width)),
                    Cell::from(row.age.map_or("-".into(), human)),
                    // Only a lock can be held without a TTL (another client's key).
                    Cell::from(row.ttl.map_or_else(
                        || match row.kind.as_str() {
                            "lock" | "fair-lock" => "never".to_owned(),
                            _ => "-".to_owned(),
                        },
                        human,
                    )),
                    Cell::from(row.fencing_token.map_or_else(
                        || if row.bad_fence { "invalid" } else { "-" }.to_owned(),
                        |t| t.to_string(),
                    )),
                    Cell::from(
                        Line::from(row.waiters.map_or("-".into(), |w| w.to_string()))
                            .right_aligned(),
                    ),
                ])
                .style(style)
            })
            .collect()
    };
    let widths = [
        Constraint::Length(name_width),
        Constraint::Length(KIND),
        Constraint::Length(holder_width),
        Constraint::Length(AGE),
        Constraint::Length(TTL),
        Constraint::Length(FENCE),
        Constraint::Length(WAIT),
    ];
    frame.render_widget(
        Table::new(rows, widths)
            .header(header)
            .column_spacing(SPACING),
        table,
    );

    let mut footer_text = format!(
        "q quit · every {} · red: held longer than {}",
        human(snapshot.refresh),
        human(snapshot.long_held)
    );
    if snapshot.rows.len() > visible {
        footer_text.push_str(&format!(" · {} of {} shown", visible, snapshot.rows.len()));
    }
    frame.render_widget(Line::from(footer_text), footer);
}

/// `text` cut to `width` characters, the last one `…` when cut.
fn truncate(text: &str, width: u16) -> String {
    crate::support::text::cut(text, usize::from(width))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn row(name: &str, age_s: Option<u64>, waiters: Option<u64>) -> Row {
        Row {
            name: name.to_owned(),
            kind: "lock".to_owned(),
            holder: "web-1 pid 4242".to_owned(),
            age: age_s.map(Duration::from_secs),
            ttl: Some(Duration::from_millis(27_200)),
            fencing_token: Some(1_718_000_000_000_123),
            bad_fence: false,
            waiters,
        }
    }

    fn snapshot(rows: Vec<Row>) -> Snapshot {
        Snapshot {
            server: "127.0.0.1:6379".into(),
            prefix: "latchkey:".into(),
            pattern: "*".into(),
            refresh: Duration::from_secs(1),
            long_held: Duration::from_secs(300),
            rows,
            error: None,
        }
    }

    /// The screen as text lines, trailing blanks trimmed.
    fn draw(
        snapshot: &Snapshot,
        width: u16,
        height: u16,
    ) -> (Vec<String>, ratatui::buffer::Buffer) {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| render(frame, snapshot)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        let lines = (0..height)
            .map(|y| {
                let line: String = (0..width)
                    .map(|x| buffer[(x, y)].symbol().to_owned())
                    .collect();
                line.trim_end().to_owned()
            })
            .collect();
        (lines, buffer)
    }

    #[test]
    fn rows_are_drawn_in_order_with_long_held_ones_highlighted() {
        let snap = snapshot(vec![
            row("nightly-report", Some(723), Some(2)),
            row(
                "a-lock-with-a-name-much-too-long-for-the-column",
                Some(41),
                Some(0),
            ),
            Row {
                holder: "other client".into(),
                ttl: None,
                fencing_token: None,
                bad_fence: false,
                ..row("foreign", None, None)
            },
            Row {
                kind: "semaphore".into(),
                holder: "3 permits".into(),
                ttl: None,
                fencing_token: None,
                ..row("jobs", None, None)
            },
        ]);
        let (lines, buffer) = draw(&snap, 80, 9);
        assert_eq!(
            lines,
            [
                "latchkey top · 127.0.0.1:6379 · prefix latchkey: · pattern *",
                "4 active, 1 longer than 5m00s",
                "NAME          KIND      HOLDER             AGE     TTL     FENCING TOKEN    WAIT",
                "nightly-repo… lock      web-1 pid 4242     12m03s  27.20s  1718000000000123    2",
                "a-lock-with-… lock      web-1 pid 4242     41.00s  27.20s  1718000000000123    0",
                "foreign       lock      other client       -       never   -                   -",
                "jobs          semaphore 3 permits          -       -       -                   -",
                "",
                "q quit · every 1.00s · red: held longer than 5m00s",
            ]
        );
        // The long-held row is red and bold, across the row; the others are not.
        for x in [0, 30, 79] {
            assert_eq!(buffer[(x, 3)].fg, Color::Red, "x={x}");
            assert!(buffer[(x, 3)].modifier.contains(Modifier::BOLD));
            assert_eq!(buffer[(x, 4)].fg, Color::Reset, "x={x}");
        }
        assert!(
            buffer[(0, 2)].modifier.contains(Modifier::REVERSED),
            "header"
        );
    }

    #[test]
    fn a_long_holder_keeps_its_pid_and_a_wide_terminal_shows_it_whole() {
        let holder = "build-agent-42.eu-west-1.internal pid 28483";
        let snap = snapshot(vec![Row {
            holder: holder.into(),
            ..row("deploy", Some(3), Some(0))
        }]);
        let (lines, _) = draw(&snap, 80, 5);
        assert!(lines[3].contains("build-a… pid 28483 "), "{}", lines[3]);
        let (lines, _) = draw(&snap, 120, 5);
        assert!(
            lines[3].contains("build-agent-42.eu-west-1… pid 28483 "),
            "{}",
            lines[3]
        );
        let (lines, _) = draw(&snap, 140, 5);
        assert!(lines[3].contains(&format!("{holder} ")), "{}", lines[3]);
        assert!(lines[3].starts_with("deploy "), "{}", lines[3]);
        // Cut where there is no pid to keep: the usual `…`.
        assert_eq!(
            cut_holder("2 reader(s) +1 writer(s) waiting", 18),
            "2 reader(s) +1 wr…"
        );
    }

    #[test]
    fn rows_that_do_not_fit_are_counted_and_errors_shown() {
        let rows = (0..5)
            .map(|i| row(&format!("lock-{i}"), Some(10 - i), None))
            .collect();
        let mut snap = snapshot(rows);
        snap.error = Some("Redis unreachable: connection refused".into());
        let (lines, _) = draw(&snap, 80, 7);
        assert_eq!(
            lines[1],
            "refresh failed, showing the last view: Redis unreachable: connection refused"
        );
        assert_eq!(lines[3].split_whitespace().next(), Some("lock-0"));
        assert_eq!(lines[5].split_whitespace().next(), Some("lock-2"));
        assert_eq!(
            lines[6],
            "q quit · every 1.00s · red: held longer than 5m00s · 3 of 5 shown"
        );
    }

    #[test]
    fn nothing_held_says_so() {
        let (lines, _) = draw(&snapshot(vec![]), 80, 5);
        assert_eq!(lines[1], "0 active, 0 longer than 5m00s");
        assert_eq!(lines[3], "nothing active matches *");
    }

    #[test]
    fn rows_sort_oldest_first_and_unknown_ages_last() {
        let mut rows = vec![
            row("young", Some(5), None),
            row("unknown", None, None),
            row("old", Some(500), None),
            row("b-twin", Some(5), None),
        ];
        sort_oldest_first(&mut rows);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["old", "b-twin", "young", "unknown"]);
    }
}
