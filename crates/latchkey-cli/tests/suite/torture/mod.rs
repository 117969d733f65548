//! `latchkey torture` through the real binary: the lock workload, the
//! election and the other primitives' workloads, each with its control run.

mod election;
mod lock;
mod primitives;
