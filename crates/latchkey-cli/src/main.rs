//! `latchkey`: a distributed `flock(1)` on Redis, lock inspection, and a
//! deployment doctor.
//!
//! ```text
//! latchkey run nightly-report --ttl 30s --no-wait -- ./report.sh
//! latchkey status nightly-report --json
//! latchkey doctor
//! latchkey demo
//! ```
//!
//! A thin layer over the `latchkey` library: one module per subcommand in
//! [`commands`] (the `Command` enum and its dispatch there too), what several
//! share in [`support`], the exit codes in [`support::exit`], and one rule
//! for errors: one line on stderr (`latchkey: …`), never a backtrace. The full reference is `docs/cli.md`.

mod commands;
mod doors;
mod support;

use std::process::ExitCode;

use clap::Parser;

use crate::commands::Command;
use crate::support::exit::{self, Failure};
use crate::support::target::{self, Target};
use crate::support::{guardian, tls_args};

/// The help heading of the options every subcommand takes (where to connect,
/// TLS, logging), so that a subcommand's help lists its own options apart.
/// Their environment variables are named in the help but their values never
/// shown: `LATCHKEY_REDIS_URL` may hold a password.
pub(crate) const GLOBAL_HEADING: &str = "Global options";

#[derive(Parser, Debug)]
#[command(
    name = "latchkey",
    version,
    about = "Distributed locks on Redis: run a command under a lock, inspect locks, check a deployment",
    after_help = exit::HELP
)]
struct Cli {
    /// Redis URL, e.g. redis://user:password@host:6379/0
    /// [default: redis://127.0.0.1:6379]. Repeat (or separate with commas)
    /// only where a subcommand's help says it takes several.
    #[arg(
        long = "redis",
        value_name = "URL",
        global = true,
        help_heading = GLOBAL_HEADING,
        hide_env_values = true,
        env = "LATCHKEY_REDIS_URL",
        value_delimiter = ','
    )]
    redis: Vec<String>,

    /// A Redis Sentinel, HOST:PORT. Repeat (or separate with commas) for
    /// each; with --master, commands go to the primary the Sentinels name
    /// and follow it across failovers (--redis then gives only the
    /// primary's password and database).
    #[arg(
        long = "sentinel",
        value_name = "HOST:PORT",
        global = true,
        help_heading = GLOBAL_HEADING,
        hide_env_values = true,
        env = "LATCHKEY_SENTINEL",
        value_delimiter = ','
    )]
    sentinel: Vec<String>,

    /// The master name the Sentinels monitor (with --sentinel).
    #[arg(
        long = "master",
        value_name = "NAME",
        global = true,
        help_heading = GLOBAL_HEADING,
        hide_env_values = true,
        env = "LATCHKEY_SENTINEL_MASTER"
    )]
    master: Option<String>,

    /// Key prefix of every lock key [default: latchkey:]. Use "" to share
    /// locks with other clients' single-key locks (redis-py, redsync, …).
    #[arg(
        long,
        value_name = "PREFIX",
        global = true,
        help_heading = GLOBAL_HEADING,
        hide_env_values = true,
        env = "LATCHKEY_PREFIX"
    )]
    prefix: Option<String>,

    #[command(flatten)]
    tls: tls_args::TlsArgs,

    /// Log what latchkey does to stderr (filter with RUST_LOG).
    #[arg(short, long, global = true, help_heading = GLOBAL_HEADING)]
    verbose: bool,

    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    // `run` and `elect` re-execute themselves as CMD's guardian (hidden).
    let mut argv = std::env::args_os().skip(1);
    if argv
        .next()
        .is_some_and(|first| first == guardian::SUBCOMMAND)
    {
        guardian::main(argv.collect());
    }
    std::panic::set_hook(Box::new(|info| {
        // A panic is a bug, but the user still gets one line, not a backtrace.
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned());
        Failure::new(exit::INTERNAL, format!("internal error: {message}")).print();
        std::process::exit(i32::from(exit::INTERNAL));
    }));

    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    if cli.verbose {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("latchkey=debug,latchkey_cli=debug")
        });
        // Colours only for a terminal: in a pipe or a log file the escape
        // sequences are noise.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        tracing_subscriber::fmt()
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .with_env_filter(filter)
            .init();
    }
    if !cli.command.supervises_a_command() {
        // `latchkey list | head` should end quietly, as Unix tools do, not
        // report a write error. Rust ignores SIGPIPE by default; restore it.
        // Not for `run`: its supervisor must outlive a closed stderr pipe
        // while the command runs (and the command gets the default anyway).
        // SAFETY: setting a signal disposition to SIG_DFL, before any thread
        // other than this one exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // An empty URL is a mistake (an unset deployment variable, a stray
    // comma), never "the default server": taken as 127.0.0.1:6379, every
    // machine would lock on its own local Redis without a word.
    let env_set_but_empty =
        cli.redis.is_empty() && std::env::var_os("LATCHKEY_REDIS_URL").is_some();
    if env_set_but_empty || cli.redis.iter().any(|url| url.trim().is_empty()) {
        Failure::usage(
            "empty Redis URL in --redis or LATCHKEY_REDIS_URL; give a URL such as \
             redis://host:6379, or leave both unset for the default",
        )
        .print();
        return ExitCode::from(exit::USAGE);
    }
    if let Err(failure) = cli.tls.check() {
        failure.print();
        return ExitCode::from(failure.code);
    }
    let sentinel = match target::sentinel_target(cli.sentinel, cli.master, &cli.redis) {
        Ok(sentinel) => sentinel,
        Err(failure) => {
            failure.print();
            return ExitCode::from(failure.code);
        }
    };
    let target = Target {
        urls: target::rejoin_sentinel_url(cli.redis),
        prefix: cli.prefix,
        tls: cli.tls,
        sentinel,
        connected: Default::default(),
    };

    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            Failure::new(
                exit::INTERNAL,
                format!("cannot start the async runtime: {e}"),
            )
            .print();
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let outcome = runtime.block_on(async {
        let outcome = cli.command.run(&target).await;
        // A release started in the background (an acquisition whose reply
        // was lost, a guard dropped on an error path) must reach Redis
        // before the runtime is dropped, or the lock stays held to its TTL.
        target.flush(FLUSH_WITHIN).await;
        outcome
    });
    // Background tasks (watchdogs, the subscriber) end with the runtime.
    drop(runtime);
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            failure.print();
            ExitCode::from(failure.code)
        }
    }
}

/// How long the process waits for background releases before exiting: more
/// than one command timeout, so a release whose reply is lost still lands.
const FLUSH_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);

/// `--help` and `--version` print as clap formats them; real usage errors
/// become one line and exit 2.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        // `latchkey` alone: the help is more useful than one line.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(exit::USAGE)
        }
        _ => {
            // Clap's first paragraph is the message (a list of missing
            // arguments spans several lines); usage and tips follow.
            let rendered = e.render().to_string();
            let message: Vec<&str> = rendered
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            Failure::usage(format!("{message} (see `latchkey --help`)")).print();
            ExitCode::from(exit::USAGE)
        }
    }
}
