//! Holds from the command line: `run` (its ends, faults, several locks,
//! supervision of CMD, `--fair`, `--permits`) and a hold kept across shell
//! commands by its token (`acquire`, `release`, `extend`).

mod at_least;
mod basics;
mod ends;
mod fair;
mod faults;
mod multi;
mod permits;
mod supervise;
mod tokens;
