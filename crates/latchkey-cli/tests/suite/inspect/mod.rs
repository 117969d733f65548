//! What the command shows of Redis: `status` and `list` (every kind),
//! the Prometheus `exporter` and `top`.

mod exporter;
mod kinds;
mod status;
mod top;
