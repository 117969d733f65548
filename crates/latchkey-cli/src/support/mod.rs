//! What several subcommands share: where to connect, process supervision,
//! argument groups, parsing and printing helpers, exit codes.

pub(crate) mod count;
pub(crate) mod describe;
pub(crate) mod duration;
pub(crate) mod exit;
pub(crate) mod guardian;
pub(crate) mod hold_args;
pub(crate) mod hold_run;
pub(crate) mod holdable;
pub(crate) mod kind_view;
pub(crate) mod patience;
pub(crate) mod process_group;
pub(crate) mod run_args;
pub(crate) mod signals;
pub(crate) mod stop;
pub(crate) mod supervise;
pub(crate) mod target;
pub(crate) mod text;
pub(crate) mod tls_args;
