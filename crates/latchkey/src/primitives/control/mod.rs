//! Control over holds (layer 4), an operator's or another process's:
//! [`revoke`] ends the holds of a name whoever holds them and makes them
//! harmless; [`request`] asks its holders to let go.

pub(crate) mod request;
pub(crate) mod revoke;
