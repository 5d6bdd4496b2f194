//! What a lock's data looks like, to tell a lock from other data under the same name: the
//! owner fields and hold counts of Redisson's hashes, and the tokens that `SET NX` libraries
//! write. The operations tool lists and breaks only what has a lock's shape.

/// Whether `field` names an owner, `"<client id>:<thread id>"`: a client id of hex digits
/// and hyphens (a UUID, as this crate and Redisson write it) and a decimal thread id.
pub(crate) fn is_owner(field: &str) -> bool {
    let Some((client, thread)) = field.rsplit_once(':') else {
        return false;
    };
    (1..=64).contains(&client.len())
        && client.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        && (1..=20).contains(&thread.len())
        && thread.bytes().all(|b| b.is_ascii_digit())
}

/// A read-write lock's field: a reader's owner field, or a writer's `"<owner>:write"`;
/// the owner and its side, or `None` for any other field.
pub(crate) fn rw_owner(field: &str) -> Option<(&str, &'static str)> {
    match field.strip_suffix(":write") {
        Some(owner) if is_owner(owner) => Some((owner, "write")),
        _ if is_owner(field) => Some((field, "read")),
        _ => None,
    }
}

/// Whether `value` is a hold count: a positive decimal number.
pub(crate) fn is_count(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 20
        && value.bytes().all(|b| b.is_ascii_digit())
        && value.bytes().any(|b| b != b'0')
}

/// Whether `value` is the token of a `SET NX` lock, in the shapes the libraries write
/// (`../shared/LAYOUTS.md` §13–16): 32 hex digits (this crate, redis-py's `uuid1().hex`,
/// node-redlock's 16 random bytes), or 24 base64 characters (redsync's 16 random bytes,
/// padded with `==`; python-redis-lock's 18, unpadded).
pub(crate) fn is_token(value: &str) -> bool {
    let hex = value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit());
    let base64 = value.len() == 24 && {
        let body = value.strip_suffix("==").unwrap_or(value);
        body.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    };
    hex || base64
}

/// An election's leader, as its hash holds it.
pub(crate) struct Leader<'a> {
    pub token: &'a str,
    pub epoch: u64,
    pub name: &'a str,
}

/// The leader an election's hash names: exactly the fields `token` (32 hex digits),
/// `epoch` (a positive number) and `name`; `None` for any other hash.
pub(crate) fn leader(fields: &[(String, String)]) -> Option<Leader<'_>> {
    let field = |wanted: &str| {
        let mut found = fields.iter().filter(|(field, _)| field == wanted);
        let (_, value) = found.next()?;
        found.next().is_none().then_some(value.as_str())
    };
    let (token, epoch, name) = (field("token")?, field("epoch")?, field("name")?);
    let shaped = fields.len() == 3
        && token.len() == 32
        && token.bytes().all(|b| b.is_ascii_hexdigit())
        && is_count(epoch);
    shaped.then(|| Leader {
        token,
        epoch: epoch.parse().unwrap_or_default(),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_client_ids_and_thread_numbers() {
        assert!(is_owner("5d4a1b7e-0c3f-4b8e-9a21-6f0e2d3c4b5a:1"));
        assert!(is_owner(
            "5d4a1b7e-0c3f-4b8e-9a21-6f0e2d3c4b5a:18446744073709551615"
        ));
        for not in [
            "a",
            "user:1",
            "session:abc",
            ":1",
            "5d4a1b7e:",
            "5d4a1b7e:1x",
            "5d4a 1b7e:1",
        ] {
            assert!(!is_owner(not), "{not:?}");
        }
        let owner = "5d4a1b7e-0c3f-4b8e-9a21-6f0e2d3c4b5a:7";
        assert_eq!(rw_owner(owner), Some((owner, "read")));
        assert_eq!(rw_owner(&format!("{owner}:write")), Some((owner, "write")));
        assert_eq!(rw_owner("mode"), None);
        assert_eq!(rw_owner("name:write"), None);
    }

    #[test]
    fn a_leader_is_a_token_an_epoch_and_a_name_and_nothing_else() {
        let hash = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            (pairs.iter())
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect()
        };
        let token = "0123456789abcdef0123456789abcdef";
        let found = hash(&[("token", token), ("epoch", "7"), ("name", "web-3/41")]);
        let leader = leader(&found).expect("a leader");
        assert_eq!(
            (leader.token, leader.epoch, leader.name),
            (token, 7, "web-3/41")
        );
        for not in [
            hash(&[("token", token), ("epoch", "7")]),
            hash(&[("token", token), ("epoch", "0"), ("name", "n")]),
            hash(&[("token", "x"), ("epoch", "7"), ("name", "n")]),
            hash(&[
                ("token", token),
                ("epoch", "7"),
                ("name", "n"),
                ("mode", "read"),
            ]),
        ] {
            assert!(super::leader(&not).is_none(), "{not:?}");
        }
    }

    #[test]
    fn counts_are_positive_numbers() {
        assert!(is_count("1") && is_count("42"));
        for not in ["", "0", "00", "-1", "1.5", "x", "123456789012345678901"] {
            assert!(!is_count(not), "{not:?}");
        }
    }

    #[test]
    fn tokens_have_the_shapes_the_libraries_write() {
        assert!(is_token("0123456789abcdef0123456789abcdef"));
        assert!(is_token("q83vEjRWeJq83vEjRWeJqw=="));
        assert!(is_token("q83vEjRWeJq83vEjRWeJq83v"));
        for not in [
            r#"{"name":"bob"}"#,
            "42",
            "",
            "0123456789abcdef0123456789abcdeg",
            "q83vEjRWeJq83vEjRWeJq8==x",
            "hello world, this is text",
        ] {
            assert!(!is_token(not), "{not:?}");
        }
    }
}
