//! What is wrong with a connection URL, said before the Redis client parses it (which only
//! says that it "did not parse"). The reasons never repeat the user information, which
//! holds the password.

/// The schemes the Redis client accepts over TCP, without and with TLS.
const PLAIN: [&str; 2] = ["redis", "valkey"];
const TLS: [&str; 2] = ["rediss", "valkeys"];
/// The schemes of Unix sockets.
const UNIX: [&str; 3] = ["unix", "redis+unix", "valkey+unix"];

/// The URL syntax, for the reasons.
const SYNTAX: &str = "redis://[user[:password]@]host[:port][/db]";

/// Checks `url` for what the Redis client would refuse or misread, with `tls` whether the
/// crate was built with TLS: `Err` says what is wrong, in words fit for
/// [`Error::InvalidUrl`](crate::Error::InvalidUrl).
pub(crate) fn check(url: &str, tls: bool) -> Result<(), String> {
    if url.trim().is_empty() {
        return Err(format!("it is empty; expected {SYNTAX}"));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "it has no scheme (no \"://\"); expected {SYNTAX}; {}",
            accepted(tls)
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    let is = |schemes: &[&str]| schemes.contains(&scheme.as_str());
    if is(&TLS) && !tls {
        return Err(format!(
            "{scheme}:// URLs need the `tls` feature of redmutex \
             (redmutex = {{ features = [\"tls\"] }})"
        ));
    }
    if is(&UNIX) && cfg!(unix) {
        return match rest.split(['?', '#']).next() {
            Some(path) if !path.is_empty() => Ok(()),
            _ => Err(format!(
                "it names no socket path; expected {scheme}:///path/to/redis.sock"
            )),
        };
    }
    if !is(&PLAIN) && !is(&TLS) {
        let scheme = printable(&scheme);
        return Err(format!("unknown scheme \"{scheme}\"; {}", accepted(tls)));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(end);
    // The user information ends at the last '@' of the authority; it is never repeated.
    let address = authority.rsplit_once('@').map_or(authority, |(_, at)| at);
    let (host, port) = split_host_port(address)?;
    if host.is_empty() {
        return Err(format!("it names no host; expected {SYNTAX}"));
    }
    if matches!(host, "0.0.0.0" | "::") {
        return Err(format!(
            "the host {host} is a wildcard address, which cannot be connected to"
        ));
    }
    if let Some(port) = port.filter(|port| !port.is_empty())
        && !port.parse::<u16>().is_ok_and(|port| port > 0)
    {
        let port = printable(port);
        return Err(format!("bad port \"{port}\": a number from 1 to 65535"));
    }
    let path = after.split(['?', '#']).next().unwrap_or_default();
    let db = path.trim_matches('/');
    if !db.is_empty() && db.parse::<i64>().is_err() {
        let db = printable(db);
        return Err(format!(
            "bad database \"{db}\" in the path: a number, as in redis://host:6379/2"
        ));
    }
    if is(&TLS)
        && let Some((_, fragment)) = after.split_once('#')
        && fragment != "insecure"
    {
        let fragment = printable(fragment);
        return Err(format!(
            "unknown fragment \"#{fragment}\": only #insecure is understood"
        ));
    }
    Ok(())
}

/// `host` and `port` (`None` without a colon) of `host:port` or `[v6]:port`.
fn split_host_port(address: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(v6) = address.strip_prefix('[') {
        let Some((host, after)) = v6.split_once(']') else {
            return Err("an IPv6 host has no closing \"]\"".to_owned());
        };
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(format!(
                    "unexpected \"{}\" after the IPv6 host",
                    printable(after)
                )),
            },
        };
    }
    Ok(match address.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (address, None),
    })
}

/// The schemes accepted, for a reason.
fn accepted(tls: bool) -> String {
    let tls = if tls {
        "rediss:// (TLS), valkey://, valkeys://"
    } else {
        "rediss:// (with the `tls` feature), valkey://"
    };
    let unix = if cfg!(unix) {
        ", unix:// and redis+unix:// (a Unix socket)"
    } else {
        ""
    };
    format!("accepted: redis://, {tls}{unix}")
}

/// At most 64 characters of `text`, without control characters, for a reason.
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_urls_pass() {
        for url in [
            "redis://127.0.0.1:6379/",
            "redis://127.0.0.1",
            "redis://:pw@h:1/2",
            "redis://user:p@ss@h:1/",
            "REDIS://h/",
            "valkey://h:1/",
            "redis://[::1]:6380/",
            "redis://h:1/?protocol=resp3",
            "unix:///tmp/redis.sock",
        ] {
            assert_eq!(check(url, false), Ok(()), "{url}");
        }
        assert_eq!(check("rediss://h:1/#insecure", true), Ok(()));
    }

    #[test]
    fn each_fault_is_named_and_the_password_never_repeated() {
        for (url, says) in [
            ("", "empty"),
            ("   ", "empty"),
            ("not a url", "no scheme"),
            ("127.0.0.1:6379", "no scheme"),
            ("http://127.0.0.1/", "unknown scheme \"http\""),
            (
                "redis://:secret@127.0.0.1:notaport/",
                "bad port \"notaport\"",
            ),
            ("redis://h:0/", "bad port \"0\""),
            ("redis://h:70000/", "bad port \"70000\""),
            ("redis:///", "no host"),
            ("redis://:secret@/", "no host"),
            ("redis://:secret@:6379/", "no host"),
            ("redis://0.0.0.0:6379/", "wildcard"),
            ("redis://h:1/db", "bad database \"db\""),
            ("redis://[::1:6379/", "closing"),
            ("unix://", "no socket path"),
        ] {
            let reason = check(url, true).expect_err(url);
            assert!(reason.contains(says), "{url:?}: {reason}");
            assert!(!reason.contains("secret"), "{url:?}: {reason}");
        }
        let reason = check("http://h/", false).unwrap_err();
        assert!(
            reason.contains("redis://") && reason.contains("unix://"),
            "{reason}"
        );
        let reason = check("rediss://h:1/#x", true).unwrap_err();
        assert!(reason.contains("#insecure"), "{reason}");
    }

    #[test]
    fn tls_urls_need_the_feature() {
        for url in [
            "rediss://127.0.0.1:1/",
            "REDISS://h/",
            "valkeys://h:1/#insecure",
        ] {
            assert_eq!(check(url, true), Ok(()), "{url}");
            let reason = check(url, false).unwrap_err();
            assert!(reason.contains("`tls` feature"), "{reason}");
        }
    }
}
