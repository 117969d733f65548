//! The simulator is deterministic: the same steps from the same state give
//! the same replies, keyspace and messages, and a clone goes on exactly as
//! the original does. (A model checker replays and branches on this.)

#[path = "differential/commands.rs"]
mod commands;
// The differential test's steps; it uses the parts this test does not.
#[allow(dead_code)]
#[path = "differential/gen.rs"]
mod gen;
// The differential test's names; it uses the parts this test does not.
#[allow(dead_code)]
#[path = "differential/keys.rs"]
mod keys;
#[path = "differential/locks.rs"]
mod locks;

use latchkey::protocol::script_text;
use latchkey_sim::{Published, Reply, Server};

use gen::{Rng, Step};

/// One step on `sim`: its reply, the keyspace after it and what it published.
fn apply(sim: &mut Server, step: &Step) -> (Reply, Vec<Reply>, Vec<Published>) {
    let reply = match step {
        Step::Script { file, keys, args } => sim.eval(
            script_text(file).expect("a script of the library"),
            keys,
            args,
        ),
        Step::Command(words) => sim.command(words),
        Step::Pause(ms) => {
            sim.advance_ms(i64::try_from(*ms).expect("a short pause"));
            Reply::ok()
        }
    };
    (reply, sim.dump(), sim.take_published())
}

#[test]
fn the_same_steps_give_the_same_states() {
    const START: i64 = 1_796_000_000_000_000;
    for seed in [11, 12, 13] {
        let mut rng = Rng::new(seed);
        let steps: Vec<Step> = (0..1500).map(|_| gen::step(&mut rng)).collect();
        let (mut a, mut b) = (Server::new(START), Server::new(START));
        let mut clone = None;
        for (i, step) in steps.iter().enumerate() {
            if i == 700 {
                clone = Some(a.clone());
            }
            let from_a = apply(&mut a, step);
            assert_eq!(
                from_a,
                apply(&mut b, step),
                "seed {seed}, step {i}: {}",
                step.describe()
            );
            if let Some(c) = clone.as_mut() {
                assert_eq!(from_a, apply(c, step), "seed {seed}, step {i} on a clone");
            }
        }
    }
}
