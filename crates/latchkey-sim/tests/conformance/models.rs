//! The comparison for primitives whose operations the library is driven
//! through in one run, recorded as a log of every request sent on the
//! primitive's keys (how many times a waiter tries or renews depends on
//! timing, so requests are not paired with operations by order): each
//! request the library sent must be one the model declares, and each
//! operation the model declares must have been sent by the library.

use latchkey_sim::model::conform::{Conforms, Scripts, Sent};

use crate::lock::Recorded;

/// A request's words, printable.
fn text(words: &[Vec<u8>]) -> Vec<String> {
    words
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

/// `sent` (the library's log) against `model`'s declared requests, but
/// for the operations `not_driven` (the library's side is not driven
/// there, or the model's configuration sends it differently): the
/// differences, each a line.
pub fn check(
    what: &str,
    scripts: &Scripts,
    model: &dyn Conforms,
    sent: &[(Sent, Recorded)],
    not_driven: &[&str],
) -> Vec<String> {
    let declared: Vec<(&'static str, Sent, Vec<String>)> = model
        .declared()
        .into_iter()
        .map(|d| {
            let shape = scripts.shape(&d.request, &d.roles);
            let mut words = vec![d.request.name.to_string()];
            words.extend(text(&d.request.keys));
            words.extend(d.request.args.iter().cloned());
            (d.op, shape, words)
        })
        .collect();
    let mut differences = Vec::new();
    for (shape, recorded) in sent {
        if !declared.iter().any(|(_, s, _)| s == shape) {
            differences.push(format!(
                "{what}: the library sent {shape:?}, which the model sends for no operation\n  \
                 (the library: {:?})",
                text(&recorded.words)
            ));
        }
    }
    for (op, shape, words) in &declared {
        if not_driven.contains(op) {
            continue;
        }
        if !sent.iter().any(|(s, _)| s == shape) {
            differences.push(format!(
                "{what}, {op}: the model sends {shape:?}, the library never sent it\n  \
                 (the model: {words:?})"
            ));
        }
    }
    differences
}
