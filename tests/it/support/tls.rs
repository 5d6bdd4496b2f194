//! Certificates for TLS servers, made in-process with `rcgen` and written to a directory of
//! their own for redis-server: a CA, a server certificate for 127.0.0.1 and localhost signed
//! by it, a client certificate signed by it, and a second CA that vouches for nothing here.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

pub struct Certs {
    dir: PathBuf,
    /// The CA that signed the server and client certificates (PEM).
    pub ca: Vec<u8>,
    /// A CA that signed neither (PEM).
    pub other_ca: Vec<u8>,
    /// The client certificate and its key (PEM).
    pub client_cert: Vec<u8>,
    pub client_key: Vec<u8>,
}

impl Certs {
    pub fn generate() -> Arc<Certs> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redmutex-tls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let other_ca = ca("other-ca");
        let ca = ca("ca");
        let (server_cert, server_key) = signed(
            &ca,
            "server",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) =
            signed(&ca, "client", &[], ExtendedKeyUsagePurpose::ClientAuth);
        let write = |name: &str, pem: &str| std::fs::write(dir.join(name), pem).unwrap();
        write("ca.crt", &ca.pem());
        write("server.crt", &server_cert);
        write("server.key", &server_key);
        Arc::new(Certs {
            ca: ca.pem().into_bytes(),
            other_ca: other_ca.pem().into_bytes(),
            client_cert: client_cert.into_bytes(),
            client_key: client_key.into_bytes(),
            dir,
        })
    }

    /// The redis-server arguments that serve TLS on `port` with these certificates (and no
    /// plain TCP port); with `auth_clients`, a client must present a certificate.
    pub fn server_args(&self, port: u16, auth_clients: bool) -> Vec<String> {
        let path = |name: &str| self.dir.join(name).display().to_string();
        [
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--tls-cert-file",
            &path("server.crt"),
            "--tls-key-file",
            &path("server.key"),
            "--tls-ca-cert-file",
            &path("ca.crt"),
            "--tls-auth-clients",
            if auth_clients { "yes" } else { "no" },
        ]
        .map(String::from)
        .to_vec()
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A self-signed CA named `name`.
fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    named(&mut params, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A certificate for `names` (IP addresses or host names) and its key, both PEM, signed by
/// `ca`, for `usage`.
fn signed(
    ca: &CertifiedIssuer<'static, KeyPair>,
    name: &str,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    named(&mut params, name);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn named(params: &mut CertificateParams, name: &str) {
    params
        .distinguished_name
        .push(DnType::CommonName, format!("redmutex test {name}"));
}
