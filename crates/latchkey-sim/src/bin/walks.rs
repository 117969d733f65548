//! `./dev sim --seconds N [--seed S]`: long seeded random walks of every
//! model's larger configurations (`latchkey_sim::model::walks`), with
//! progress, a summary, and on a violation the shrunk trace and the
//! command that replays it. Exit status: 0 no violation, 1 a violation,
//! 2 a bad command line.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use latchkey_sim::model::runner::{self, Options};

const USAGE: &str = "\
usage: walks --seconds N [--seed S] [--model NAME] [--steps N] [--progress SECS]
       walks --seed S --model NAME --walk I [--steps N]     (replay one walk)
       walks --list

  --seconds N     walk for N seconds (every model walks at least once)
  --seed S        the run's seed (default: from the clock, printed); walk I of
                  model NAME walks from a seed derived from (S, NAME, I)
  --model NAME    only this model (--list names them)
  --walk I        only walk I of --model, once: replays a violation
  --steps N       steps a walk (default: each model's own, 2000 or 3000)
  --progress S    print progress every S seconds (default 5)
  --list          the models and the invariants checked";

fn value<T: std::str::FromStr>(flag: &str, raw: Option<String>) -> Result<T, String> {
    let raw = raw.ok_or_else(|| format!("{flag} needs a value"))?;
    raw.parse()
        .map_err(|_| format!("{flag}: {raw:?} is not a non-negative whole number"))
}

/// The options, or `Err(None)` for `--help`, `Err(Some(why))` for a bad
/// command line; and whether `--list` was asked.
fn parse(args: Vec<String>) -> Result<(Options, bool), Option<String>> {
    let mut options = Options {
        duration: Duration::ZERO,
        // A run without --seed explores new walks; its seed is printed.
        seed: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        only: None,
        walk: None,
        steps: None,
        progress: Duration::from_secs(5),
    };
    let (mut seconds, mut list) = (None, false);
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--seconds" => seconds = Some(value::<u64>(&flag, args.next())?),
            "--seed" => options.seed = value(&flag, args.next())?,
            "--model" => options.only = Some(value(&flag, args.next())?),
            "--walk" => options.walk = Some(value(&flag, args.next())?),
            "--steps" => options.steps = Some(value(&flag, args.next())?),
            "--progress" => {
                options.progress = Duration::from_secs(value::<u64>(&flag, args.next())?.max(1))
            }
            "--list" => list = true,
            "-h" | "--help" => return Err(None),
            other => return Err(Some(format!("unknown argument {other:?}"))),
        }
    }
    if options.walk.is_some() && options.only.is_none() {
        return Err(Some(
            "--walk needs --model (the model the walk is of)".into(),
        ));
    }
    match seconds {
        Some(s) => options.duration = Duration::from_secs(s),
        None if list || options.walk.is_some() => {}
        None => return Err(Some("--seconds N is required".into())),
    }
    Ok((options, list))
}

fn main() -> ExitCode {
    let (options, list) = match parse(std::env::args().skip(1).collect()) {
        Ok(parsed) => parsed,
        Err(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(Some(why)) => {
            eprintln!("walks: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let targets = match runner::select(options.only.as_deref()) {
        Ok(t) => t,
        Err(why) => {
            eprintln!("walks: {why}");
            return ExitCode::from(2);
        }
    };
    if list {
        for t in &targets {
            println!("{} ({} steps a walk)", t.name, t.steps);
            for inv in t.invariants {
                println!("    - {inv}");
            }
        }
        return ExitCode::SUCCESS;
    }
    match options.walk {
        Some(i) => println!(
            "replaying walk {i} of {} in the run seeded {}",
            targets[0].name, options.seed
        ),
        None => println!(
            "walking {} model configurations for {} s, seed {} (--seed {} walks the same again)",
            targets.len(),
            options.duration.as_secs(),
            options.seed,
            options.seed
        ),
    }
    let mut out = std::io::stdout();
    match runner::run(&targets, &options, &mut out) {
        Ok(summary) if summary.failure.is_some() => ExitCode::from(1),
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("walks: {e}");
            ExitCode::from(1)
        }
    }
}
