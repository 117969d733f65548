//! What went wrong in a TLS connection, in words an operator can act on
//! (layer 1, vocabulary): the classifier behind [`Error::Tls`](crate::Error::Tls).
//!
//! redis-rs reports a failed handshake as an I/O error (tokio-rustls wraps
//! the `rustls::Error` in an `io::Error`) or, for a refused client
//! configuration, as a client error carrying the `rustls::Error`. We find
//! the `rustls::Error` by type, never by message text, and say what it means
//! for a Redis connection.

use std::error::Error as StdError;
use std::sync::Arc;

use rustls::{AlertDescription, CertificateError};

/// Why a TLS connection failed, when `err` is a TLS failure; `None` for
/// anything else (a refused TCP connection stays "unreachable").
///
/// (A certificate and key that rustls refuses as a pair never get this far:
/// `transport/tls/mod.rs` checks them before connecting.)
pub(crate) fn tls_failure(err: &redis::RedisError) -> Option<String> {
    let tls = find_rustls(err)?;
    Some(explain(tls))
}

/// The `rustls::Error` somewhere in `err`'s chain: directly, behind the
/// `Arc` redis-rs keeps its inner errors in, or inside an `io::Error`.
fn find_rustls<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(found) = inner(err) {
            return Some(found);
        }
        if let Some(arc) = err.downcast_ref::<Arc<dyn StdError + Send + Sync>>() {
            let unwrapped: &(dyn StdError + 'static) = &**arc;
            if let Some(found) = inner(unwrapped) {
                return Some(found);
            }
        }
        next = err.source();
    }
    None
}

/// `err` itself as a `rustls::Error`, or the one an `io::Error` carries.
fn inner<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = err.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    let io = err.downcast_ref::<std::io::Error>()?;
    io.get_ref()?.downcast_ref::<rustls::Error>()
}

/// What `tls` means for a connection to Redis, and what to do about it.
pub(crate) fn explain(tls: &rustls::Error) -> String {
    use rustls::Error as E;
    let what = match tls {
        // BadSignature: a trusted CA of the same name did not sign it.
        E::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature) => {
            "the server's certificate is not signed by a CA we trust (unknown issuer); \
             give the CA that signed it (tls_ca_file, --tls-ca)"
                .to_owned()
        }
        E::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "the server's certificate is not valid for the host in the URL (or the TLS \
              server name given); put a name (or IP address) the certificate carries in the \
              URL, or give the name as the TLS server name (tls_server_name, --tls-server-name)"
            .to_owned(),
        E::InvalidCertificate(
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. },
        ) => "the server's certificate has expired or is not valid yet".to_owned(),
        E::InvalidCertificate(other) => format!("the server's certificate was refused ({other:?})"),
        E::AlertReceived(AlertDescription::CertificateRequired) | E::NoCertificatesPresented => {
            "the server requires a client certificate (tls-auth-clients); give one \
             (tls_client_cert, --tls-cert and --tls-key)"
                .to_owned()
        }
        E::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::AccessDenied
            // What OpenSSL sends when our certificate's signature does not
            // verify against a CA of the same name.
            | AlertDescription::DecryptError),
        ) => format!(
            "the server refused our client certificate ({alert:?}); is it signed by a CA \
             the server trusts (tls-ca-cert-file)?"
        ),
        E::AlertReceived(alert) => format!("the server ended the TLS handshake ({alert:?})"),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            "the server does not speak TLS on this port; is it a plain port (then use redis://)?"
                .to_owned()
        }
        E::InconsistentKeys(_) => {
            "the client certificate and its private key do not belong together".to_owned()
        }
        other => format!("the TLS handshake failed ({other})"),
    };
    format!("{what} [{tls}]")
}
