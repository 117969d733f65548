//! The plain lock model's half of the conformance check: what it sends
//! for each operation, from `lock_request::request`, which its steps send
//! through.

use crate::model::common::token;
use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::lock::{LockModel, Op};
use crate::model::lock_request::request;

/// The plain lock's operations by the conformance test's names. An
/// exhaustive match, so that a new operation must be named here.
fn lock_op_name(op: Op) -> &'static str {
    match op {
        Op::Try => "first try",
        Op::Retry => "waiter's try",
        Op::Renew => "renew",
        Op::Issue => "issue fencing token",
        Op::Release => "release",
        Op::Cleanup => "release after a lost reply",
        Op::Write => "fenced write",
        Op::Land => "fenced write lands",
    }
}

impl Conforms for LockModel {
    fn declared(&self) -> Vec<Declared<'_>> {
        const OPS: [Op; 8] = [
            Op::Try,
            Op::Retry,
            Op::Renew,
            Op::Issue,
            Op::Release,
            Op::Cleanup,
            Op::Write,
            Op::Land,
        ];
        let roles = Roles::lock(self.key(), self.config.ttl);
        OPS.into_iter()
            .filter_map(|op| {
                let request = request(self, op, 0, token(0, 1))?;
                Some(Declared {
                    op: lock_op_name(op),
                    request,
                    roles: roles.clone(),
                })
            })
            .collect()
    }
}
