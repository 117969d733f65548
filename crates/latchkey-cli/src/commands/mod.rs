//! One module per subcommand (a folder where a subcommand has parts of its
//! own). No command imports another: what several share is in `support`.

pub(crate) mod acquire;
pub(crate) mod demo;
pub(crate) mod doctor;
pub(crate) mod elect;
pub(crate) mod exporter;
pub(crate) mod latch;
pub(crate) mod request_release;
pub(crate) mod revoke;
pub(crate) mod run;
pub(crate) mod signal;
pub(crate) mod status;
pub(crate) mod top;
pub(crate) mod wait;

use clap::Subcommand;

use crate::support::exit::{Failure, Outcome};
use crate::support::target::Target;

/// What several `--redis` URLs mean, in the help of the subcommands that
/// take them (and only there: `latch`, `elect` and the others refuse them),
/// with the options of the subcommand that refuse it.
macro_rules! redlock_help {
    ($($refused:literal)?) => {
        concat!(
            "Several --redis URLs (repeat, or separate with commas) of independent servers make a ",
            "Redlock: the lock is held while a majority of them agree.",
            $(" Not with ", $refused, ".")?
        )
    };
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run a command while holding a lock; a distributed flock(1).
    #[command(
        override_usage = "latchkey run [OPTIONS] <NAME> -- <CMD>...",
        after_help = redlock_help!("--fair, --permits, --read or --write")
    )]
    Run(run::RunArgs),
    /// Acquire a lock and exit, leaving it held until its TTL; prints the
    /// owner token, then the fencing token.
    #[command(after_help = redlock_help!("--fair"))]
    Acquire(acquire::AcquireArgs),
    /// Release a lock acquired with `acquire`, given its token.
    #[command(after_help = redlock_help!())]
    Release(acquire::ReleaseArgs),
    /// Reset the TTL of a lock acquired with `acquire`, given its token.
    #[command(after_help = redlock_help!())]
    Extend(acquire::ExtendArgs),
    /// End every hold of a name, whoever holds it (an operator's action),
    /// and raise its fencing counter past the revoked holders' tokens.
    Revoke(revoke::RevokeArgs),
    /// Ask the holders of a name to let go: a `run` or `elect` holder stops
    /// CMD (SIGTERM, then --grace); prints how many connections heard it.
    RequestRelease(request_release::RequestReleaseArgs),
    /// Show one lock: held or not, TTL left, holder, age, fencing token.
    Status(status::StatusArgs),
    /// List locks whose names match a glob pattern (uses SCAN, never KEYS).
    List(status::ListArgs),
    /// A live view of the held locks, oldest first; q quits.
    Top(top::TopArgs),
    /// Serve Prometheus metrics of the locks (scanned periodically) over HTTP.
    Exporter(exporter::ExporterArgs),
    /// Check the Redis server for lock safety: eviction, persistence,
    /// replication, cluster mode, clock, latency, permissions.
    #[command(
        after_help = "Several --redis URLs (repeat, or separate with commas): each server is checked."
    )]
    Doctor(doctor::DoctorArgs),
    /// Show lost updates without a lock and none with latchkey (starts a
    /// private redis-server unless --redis is given).
    Demo(demo::DemoArgs),
    /// Prove correctness under faults: worker processes contend for a lock
    /// while faults are injected; prints one row of figures per scenario
    /// (starts private redis-servers unless --redis is given).
    Torture(latchkey_torture::TortureArgs),
    /// Send a signal to the waiters on a name (all, or one with --one);
    /// prints the number of receivers.
    Signal(signal::SignalArgs),
    /// Wait for a signal on one or more names (or patterns); prints what
    /// it received, exits 1 on timeout.
    Wait(wait::WaitArgs),
    /// A count-down latch: create it (--count N), count it down, or wait
    /// until it is open.
    Latch(latch::LatchArgs),
    /// Wait at a barrier until all --parties N have arrived; prints the
    /// generation released, exits 1 on timeout.
    Barrier(latch::BarrierArgs),
    /// Run a command only while this process leads an election; campaign
    /// again (or exit 75 with --once) when leadership is lost.
    #[command(override_usage = "latchkey elect [OPTIONS] <NAME> -- <CMD>...")]
    Elect(elect::ElectArgs),
    /// Print the leader of an election (value, term, since when); --watch
    /// follows every change.
    Leader(elect::LeaderArgs),
    /// Serve the lock verbs as Model Context Protocol tools over stdio, for
    /// AI agents (docs/agents.md); never renews a lock on its own.
    Mcp(crate::doors::mcp::McpArgs),
    /// Serve the lock verbs as HTTP/JSON (docs/http.md): bearer tokens, or
    /// loopback only; never renews a lock on its own.
    Serve(crate::doors::http::ServeArgs),
}

impl Command {
    /// Whether this subcommand runs a CMD under supervision (`run`, `elect`),
    /// which must outlive a closed stderr pipe.
    pub(crate) fn supervises_a_command(&self) -> bool {
        matches!(self, Command::Run(_) | Command::Elect(_))
    }

    /// Runs the subcommand against `target`.
    ///
    /// # Cancel safety
    ///
    /// As the subcommand's own function: `main` runs it to completion, never
    /// drops it part-way.
    pub(crate) async fn run(self, target: &Target) -> Outcome {
        match self {
            Command::Run(args) => run::run(target, args).await,
            Command::Acquire(args) => acquire::acquire(target, args).await,
            Command::Release(args) => acquire::release(target, args).await,
            Command::Extend(args) => acquire::extend(target, args).await,
            Command::Revoke(args) => revoke::revoke(target, args).await,
            Command::RequestRelease(args) => request_release::request_release(target, args).await,
            Command::Status(args) => status::status(target, args).await,
            Command::List(args) => status::list(target, args).await,
            Command::Top(args) => top::top(target, args).await,
            Command::Exporter(args) => exporter::exporter(target, args).await,
            Command::Doctor(args) => doctor::doctor(target, args).await,
            Command::Demo(args) => demo::demo(target, args).await,
            Command::Torture(args) => {
                latchkey_torture::run(&target.urls, target.prefix.as_deref(), args)
                    .await
                    .map_err(|f| Failure::new(f.code, f.message))
            }
            Command::Signal(args) => signal::signal(target, args).await,
            Command::Wait(args) => wait::wait(target, args).await,
            Command::Latch(args) => latch::latch(target, args).await,
            Command::Barrier(args) => latch::barrier(target, args).await,
            Command::Elect(args) => elect::elect(target, args).await,
            Command::Leader(args) => elect::leader(target, args).await,
            Command::Mcp(args) => crate::doors::mcp::mcp(target, args).await,
            Command::Serve(args) => crate::doors::http::serve(target, args).await,
        }
    }
}
