//! `latchkey top [PATTERN] [--long-held D] [--refresh D]`: a live view of
//! every active primitive (held locks, semaphores with permits, read-write
//! locks, latches not yet open, barriers with parties arrived, elections
//! with a leader; [`Client::list_all`]), oldest first, redrawn every
//! second; `q` quits.
//!
//! ```text
//! $ latchkey top 'billing:*' --long-held 2m
//! ```
//!
//! The screen is [`view::render`] of a [`Snapshot`]; this file only
//! loads snapshots (a background task, so a slow `SCAN` never delays a key)
//! and reads keys (a thread: crossterm's reader blocks). Waiters per lock
//! are the connections subscribed to its release channel (`PUBSUB NUMSUB`
//! of `{P + name}:released`, see `docs/protocol.md`; `SHARDNUMSUB` on every
//! primary of a cluster): every latchkey process waiting for the lock has
//! one, whatever its number of waiting tasks.

mod cells;
mod view;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;
use latchkey::Client;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::Target;
use view::Snapshot;

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Glob over names (Redis MATCH syntax: * ? [abc] \x).
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Highlight what is held longer than this.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "5m")]
    pub long_held: Duration,
    /// How often to reload the view.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "1s")]
    pub refresh: Duration,
}

/// What the keyboard (or the terminal) asks for.
enum Input {
    Quit,
    Redraw,
}

pub async fn top(target: &Target, args: TopArgs) -> Outcome {
    if !std::io::stdout().is_terminal() {
        return Err(Failure::usage(
            "top draws on a terminal; for scripts use `latchkey list` (or --json)",
        ));
    }
    if args.refresh < Duration::from_millis(100) {
        return Err(Failure::usage("--refresh must be at least 100ms"));
    }
    let client = target.client("top").await?;
    let mut snapshot = Snapshot {
        server: client.server(),
        prefix: String::from_utf8_lossy(client.prefix()).into_owned(),
        pattern: args.pattern.clone(),
        refresh: args.refresh,
        long_held: args.long_held,
        rows: Vec::new(),
        error: None,
    };
    // The first view before the screen switches: a server that answers
    // PING but not SCAN fails here with one line, as other commands do.
    snapshot.rows = load(&client, &args.pattern).await?;

    let (loaded_tx, mut loaded) = mpsc::channel(1);
    let loader = tokio::spawn(reload(
        client,
        args.pattern.clone(),
        args.refresh,
        loaded_tx,
    ));
    let (input_tx, mut inputs) = mpsc::unbounded_channel();
    // Not joined: it blocks in `event::read` and ends with the process.
    std::thread::spawn(move || read_keys(input_tx));

    let mut screen = Screen::enter()?;
    let stop = crate::support::stop::stop_signal();
    tokio::pin!(stop);
    let outcome = loop {
        screen.draw(&snapshot)?;
        tokio::select! {
            _ = &mut stop => break Ok(exit::OK),
            input = inputs.recv() => match input {
                Some(Input::Redraw) => {}
                Some(Input::Quit) => break Ok(exit::OK),
                None => break Err(Failure::new(exit::INTERNAL, "lost the terminal's input")),
            },
            result = loaded.recv() => match result {
                Some(Ok(rows)) => {
                    snapshot.rows = rows;
                    snapshot.error = None;
                }
                Some(Err(e)) => snapshot.error = Some(e.to_string()),
                None => break Ok(exit::OK),
            },
        }
    };
    loader.abort();
    drop(screen);
    outcome
}

/// The terminal in raw mode on the alternate screen; restored on drop.
struct Screen(ratatui::DefaultTerminal);

impl Screen {
    fn enter() -> Result<Screen, Failure> {
        match ratatui::try_init() {
            Ok(terminal) => Ok(Screen(terminal)),
            Err(e) => {
                let _ = ratatui::try_restore();
                Err(Failure::new(
                    exit::INTERNAL,
                    format!("cannot set up the terminal: {e}"),
                ))
            }
        }
    }

    fn draw(&mut self, snapshot: &Snapshot) -> Result<(), Failure> {
        self.0
            .draw(|frame| view::render(frame, snapshot))
            .map(|_| ())
            .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot draw: {e}")))
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Loads a view every `every` and sends it (or the error) to the screen.
async fn reload(
    client: Client,
    pattern: String,
    every: Duration,
    views: mpsc::Sender<latchkey::Result<Vec<view::Row>>>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // The first view was loaded before the screen opened.
    loop {
        ticks.tick().await;
        let view = load(&client, &pattern).await;
        if views.send(view).await.is_err() {
            return;
        }
    }
}

/// The active primitives matching `pattern`, with the waiters of each held
/// lock, oldest first.
async fn load(client: &Client, pattern: &str) -> latchkey::Result<Vec<view::Row>> {
    let infos = client.list_all(pattern).await?;
    let held: Vec<&[u8]> = infos
        .iter()
        .filter_map(|info| match info {
            latchkey::inspect::PrimitiveInfo::Lock(lock) if lock.held => Some(&lock.name[..]),
            latchkey::inspect::PrimitiveInfo::FairLock(fair) if fair.lock.held => {
                Some(&fair.lock.name[..])
            }
            _ => None,
        })
        .collect();
    let waiters = waiters(client, &held).await;
    Ok(Snapshot::rows_of(&infos, &waiters))
}

/// Waiting clients of each lock (subscribers of its release channel), by
/// lock name; empty when that cannot be told (the column then shows `-`).
async fn waiters(client: &Client, names: &[&[u8]]) -> HashMap<Vec<u8>, u64> {
    match client.lock_waiters(names).await {
        Ok(counts) => names.iter().map(|n| n.to_vec()).zip(counts).collect(),
        Err(e) => {
            tracing::debug!(error = %e, "counting waiters failed; waiters unknown");
            HashMap::new()
        }
    }
}

/// Reads the keyboard until the screen goes away: `q`, Esc or Ctrl-C quit.
fn read_keys(inputs: mpsc::UnboundedSender<Input>) {
    loop {
        let input = match event::read() {
            Ok(Event::Key(key)) if key.kind == KeyEventKind::Press => match key.code {
                KeyCode::Char('q' | 'Q') | KeyCode::Esc => Input::Quit,
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Input::Quit,
                _ => continue,
            },
            Ok(Event::Resize(..)) => Input::Redraw,
            Ok(_) => continue,
            Err(_) => return,
        };
        if inputs.send(input).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use latchkey_testkit::{eventually, RedisServer};

    async fn connect(redis: &RedisServer) -> latchkey::Client {
        latchkey::Client::builder(&redis.url())
            .prefix("test:")
            .connect()
            .await
            .unwrap()
    }

    /// The WAIT of the lock `name` in a freshly loaded view.
    async fn wait_column(client: &latchkey::Client, name: &str) -> Option<u64> {
        let rows = super::load(client, "*").await.unwrap();
        rows.iter().find(|r| r.name == name).and_then(|r| r.waiters)
    }

    /// The holder listens on its lock's channel (for revocations and
    /// release requests, as `run` does): WAIT counts the others only.
    #[tokio::test]
    async fn wait_counts_the_waiters_not_the_holder() {
        let redis = RedisServer::start();
        let (holder, waiter, observer) = (
            connect(&redis).await,
            connect(&redis).await,
            connect(&redis).await,
        );
        let ttl = Duration::from_secs(30);
        let guard = holder.lock("held", ttl).unwrap().acquire().await.unwrap();
        let listening = guard.release_requested();
        tokio::pin!(listening);
        let polled = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::future::Future::poll(listening.as_mut(), cx).is_pending())
        });
        assert!(polled.await, "nobody asked yet");
        let channel = "{test:held}:released";
        eventually("the holder listens", || async {
            redis.subscribers(channel) == 1
        })
        .await;
        assert_eq!(wait_column(&observer, "held").await, Some(0));

        let lock = waiter.lock("held", ttl).unwrap();
        let waiting = tokio::spawn(async move { lock.acquire_until(ttl).await });
        eventually("the waiter listens", || async {
            redis.subscribers(channel) == 2
        })
        .await;
        assert_eq!(wait_column(&observer, "held").await, Some(1));
        waiting.abort();
    }
}
