//! TLS: the `redis` clients a node connects with, the certificates given to the builder,
//! and the crypto provider rustls needs. (`rediss://` URLs without the `tls` feature are
//! refused with the other bad URLs, in `topology::redis_url`.)

use redis::{ConnectionAddr, ConnectionInfo, RedisError, RedisResult};

/// The certificates given to the builder, in PEM (none without the `tls` feature).
#[derive(Clone, Default)]
pub(crate) struct Certificates {
    /// Trusted instead of the public root certificates.
    #[cfg(feature = "tls")]
    pub root_ca: Option<Vec<u8>>,
    /// Certificate chain and private key presented to a server that asks for one.
    #[cfg(feature = "tls")]
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

/// A `redis` client for `info`, carrying the builder's certificates when it is a TLS address.
pub(crate) fn client(
    info: ConnectionInfo,
    certificates: &Certificates,
) -> RedisResult<redis::Client> {
    if !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
        #[cfg(feature = "tls")]
        if certificates.root_ca.is_some() || certificates.client.is_some() {
            return Err(RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "TLS certificates were given for a URL without TLS; use rediss://",
            )));
        }
        let _ = certificates;
        return redis::Client::open(info);
    }
    #[cfg(feature = "tls")]
    {
        install_crypto_provider();
        let pems = [
            ("tls_root_ca", certificates.root_ca.as_ref()),
            (
                "tls_client_cert",
                certificates.client.as_ref().map(|(cert, _)| cert),
            ),
        ];
        for (setting, pem) in pems {
            if pem.is_some_and(|pem| !has_certificate(pem)) {
                return Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "no PEM certificate found",
                    format!("in what {setting} was given"),
                )));
            }
        }
        if certificates.root_ca.is_none() && certificates.client.is_none() {
            return redis::Client::open(info);
        }
        redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: certificates.client.as_ref().map(|(cert, key)| {
                    redis::ClientTlsConfig {
                        client_cert: cert.clone(),
                        client_key: key.clone(),
                    }
                }),
                root_cert: certificates.root_ca.clone(),
            },
        )
    }
    #[cfg(not(feature = "tls"))]
    redis::Client::open(info)
}

/// Whether `pem` holds a certificate; the redis crate takes a PEM without any for an empty
/// list, and every handshake would fail later.
#[cfg(feature = "tls")]
fn has_certificate(pem: &[u8]) -> bool {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem).any(|cert| cert.is_ok())
}

/// rustls needs a process-wide crypto provider and panics at the first connect without one.
/// This installs `ring` unless the application installed a provider of its own first.
#[cfg(feature = "tls")]
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error means a provider is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Whether `err` is a failed TLS handshake or a TLS protocol error (a certificate refused by
/// either side, a wrong CA, an alert from the server).
pub(crate) fn is_tls_error(err: &RedisError) -> bool {
    #[cfg(feature = "tls")]
    {
        use std::error::Error;
        // The redis crate keeps the I/O error behind an `Arc`, and rustls its own error
        // inside the I/O error.
        type Shared = std::sync::Arc<dyn Error + Send + Sync>;
        let Some(source) = err.source() else {
            return false;
        };
        let io = match source.downcast_ref::<Shared>() {
            Some(shared) => shared.downcast_ref::<std::io::Error>(),
            None => source.downcast_ref::<std::io::Error>(),
        };
        io.and_then(|io| io.get_ref())
            .is_some_and(|inner| inner.is::<rustls::Error>())
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = err;
        false
    }
}
