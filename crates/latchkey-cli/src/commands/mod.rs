//! One module per subcommand (a folder where a subcommand has parts of its
//! own). No command imports another: what several share is in `support`.

pub(crate) mod acquire;
pub(crate) mod demo;
pub(crate) mod doctor;
pub(crate) mod elect;
pub(crate) mod exporter;
pub(crate) mod latch;
pub(crate) mod run;
pub(crate) mod signal;
pub(crate) mod status;
pub(crate) mod top;
pub(crate) mod wait;
