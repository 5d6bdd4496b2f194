//! Without the `tls` feature, a `rediss://` URL is refused with an error that says how to get
//! TLS, and nothing is sent.
#![cfg(not(feature = "tls"))]

use redmutex::LockClient;

#[test]
fn a_tls_url_without_the_feature_is_an_error_naming_the_feature() {
    for url in ["rediss://127.0.0.1:1/", "rediss://127.0.0.1:1/#insecure"] {
        let err = LockClient::open(url).unwrap_err();
        assert!(err.is_invalid_input(), "{err}");
        assert!(err.to_string().contains("`tls` feature"), "{err}");
    }
}
