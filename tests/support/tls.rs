//! Certificates for TLS servers, made by the `openssl` command-line tool in a directory of
//! their own: a CA, a server certificate for 127.0.0.1 and localhost signed by it, a client
//! certificate signed by it, and a second CA that vouches for nothing here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

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
        ca(&dir, "ca");
        ca(&dir, "other-ca");
        signed(
            &dir,
            "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        );
        signed(&dir, "client", "extendedKeyUsage=clientAuth\n");
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        Arc::new(Certs {
            ca: read("ca.crt"),
            other_ca: read("other-ca.crt"),
            client_cert: read("client.crt"),
            client_key: read("client.key"),
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

/// A self-signed CA: `<name>.crt` and `<name>.key`.
fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=redmutex test {name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

/// A key and a certificate signed by `ca.crt`, with the X.509 v3 extensions `extensions`.
fn signed(dir: &Path, name: &str, extensions: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), extensions).unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN=redmutex test {name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command-line tool makes the test certificates; install openssl");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
