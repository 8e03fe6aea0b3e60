//! String formats of the project file. Each is a check (what validation runs) and the same
//! rule as a regular expression (what the JSON Schema says), in the syntax common to
//! ECMA-262 and Python `re`; a test checks the two agree on many strings.

use manifest_core::shape::Pattern;

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// A DNS label of lowercase letters, digits and hyphens, not starting or ending with a
/// hyphen (the length is the caller's).
fn ldh_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
        && b.first().is_some_and(|&c| c != b'-')
        && b.last().is_some_and(|&c| c != b'-')
}

/// The project `name`: one DNS label, part of the canonical hostname.
pub(super) static PROJECT_NAME: Pattern = Pattern {
    describe: "a DNS label: 1-40 lowercase letters, digits or hyphens, not starting or ending with a hyphen, and no `--` in the third and fourth places (reserved for IDNA, as in `xn--`)",
    // A first character, then either one more (the last), or a second and a rest that ends
    // in a letter or digit and does not begin with `--` (places three and four).
    regex: "^[a-z0-9](?:[a-z0-9]|[a-z0-9-](?:[a-z0-9](?:[a-z0-9-]{0,36}[a-z0-9])?|-[a-z0-9](?:[a-z0-9-]{0,35}[a-z0-9])?))?$",
    check: |s| s.len() <= 40 && ldh_label(s) && s.get(2..4) != Some("--"),
    exact: true,
};

/// A customer hostname: a lowercase LDH fully qualified name, at least two labels, the last
/// beginning with a letter (so never an IP address), no trailing dot, not under `.localhost`.
pub(super) static HOSTNAME: Pattern = Pattern {
    describe: "a lowercase DNS name such as `www.example.com`: two or more labels of letters, digits and inner hyphens (at most 63 each), the last beginning with a letter, no trailing dot or wildcard, and not under `.localhost` (local only)",
    regex: "^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$",
    check: |s| {
        let labels: Vec<&str> = s.split('.').collect();
        labels.len() >= 2
            && labels.iter().all(|l| l.len() <= 63 && ldh_label(l))
            && labels.last().and_then(|l| l.bytes().next()).is_some_and(|b| b.is_ascii_lowercase())
            && !s.ends_with(".localhost")
    },
    // A regex cannot refuse the `.localhost` suffix without a lookaround.
    exact: false,
};

/// `app.dir`, `app.entrypoint` and `manifest`: a path relative to the project file's folder
/// that stays inside it.
pub(super) static RELATIVE_PATH: Pattern = Pattern {
    describe: "a relative path inside the project's folder: `/`-separated names, no leading `/`, no `\\`, no empty or `..` segment",
    // `^SEG(/SEG)*$`, SEG being free of `/` and `\` and not `..`.
    regex: "^(?:[^/\\\\.][^/\\\\]*|\\.[^/\\\\.][^/\\\\]*|\\.\\.[^/\\\\]+|\\.)(?:/(?:[^/\\\\.][^/\\\\]*|\\.[^/\\\\.][^/\\\\]*|\\.\\.[^/\\\\]+|\\.))*$",
    check: |s| !s.is_empty() && !s.contains('\\') && s.split('/').all(|seg| !seg.is_empty() && seg != ".."),
    exact: true,
};

/// `app.healthPath`: an HTTP path the agent requests from the app.
pub(super) static HEALTH_PATH: Pattern = Pattern {
    describe: "an HTTP path beginning with `/`, of visible ASCII characters (no spaces)",
    regex: "^/[!-~]*$",
    check: |s| s.starts_with('/') && s.bytes().all(|b| b.is_ascii_graphic()),
    exact: true,
};

/// A `secrets.*.fromEnv` name: a variable of the deployer's own environment.
pub(super) static LOCAL_ENV_NAME: Pattern = Pattern {
    describe: "an environment variable name: a letter or `_`, then letters, digits or `_` (at most 128)",
    regex: "^[A-Za-z_][A-Za-z0-9_]{0,127}$",
    check: |s| {
        (1..=128).contains(&s.len())
            && s.as_bytes().first().is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    },
    exact: true,
};

/// An `access.allowClients` entry: a client network in CIDR form, or one address.
pub(super) static CLIENT_NETWORK: Pattern = Pattern {
    describe: "an IPv4 or IPv6 network in CIDR form (`203.0.113.0/24`, `2001:db8::/32`) or one address (`198.51.100.7`), with no bit set past the prefix",
    // The characters and the shape; the address itself, the prefix's bound and the host
    // bits are the check's.
    regex: "^[0-9A-Fa-f:.]+(?:/[0-9]{1,3})?$",
    check: |s| s.parse::<crate::gateway::ClientNetwork>().is_ok(),
    exact: false,
};

/// Every format, for the agreement test.
#[cfg(test)]
pub(super) static ALL: &[(&str, &Pattern)] = &[
    ("PROJECT_NAME", &PROJECT_NAME),
    ("HOSTNAME", &HOSTNAME),
    ("RELATIVE_PATH", &RELATIVE_PATH),
    ("HEALTH_PATH", &HEALTH_PATH),
    ("LOCAL_ENV_NAME", &LOCAL_ENV_NAME),
    ("CLIENT_NETWORK", &CLIENT_NETWORK),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(p: &Pattern, s: &str) -> bool {
        (p.check)(s)
    }

    #[test]
    fn names_are_dns_labels() {
        for good in ["a", "0", "ab", "a-b", "node-demo", "a1-b2-c3", &"a".repeat(40), "ab-c", "abc--d"] {
            assert!(ok(&PROJECT_NAME, good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", "xn--abc", "ab--", &"a".repeat(41), "a b"] {
            assert!(!ok(&PROJECT_NAME, bad), "{bad}");
        }
    }

    #[test]
    fn hostnames_are_public_lowercase_names() {
        for good in ["example.com", "www.example.com", "a.b.c.d.io", "1.example.org", "xn--bcher-kva.example"] {
            assert!(ok(&HOSTNAME, good), "{good}");
        }
        for bad in [
            "example",
            "Example.com",
            "example.com.",
            "*.example.com",
            "a..com",
            "-a.com",
            "a-.com",
            "1.2.3.4",
            "app.localhost",
            "a.b.localhost",
            &format!("{}.com", "a".repeat(64)),
        ] {
            assert!(!ok(&HOSTNAME, bad), "{bad}");
        }
    }

    #[test]
    fn paths_stay_inside_the_folder() {
        for good in [".", "server.js", "./server.js", "src/app/server.js", ".env.js", "..a", "..."] {
            assert!(ok(&RELATIVE_PATH, good), "{good}");
        }
        for bad in ["", "/srv", "..", "../x", "a/../b", "a//b", "a/", "a\\b"] {
            assert!(!ok(&RELATIVE_PATH, bad), "{bad}");
        }
        assert!(ok(&HEALTH_PATH, "/health?full=1"));
        assert!(!ok(&HEALTH_PATH, "health"));
        assert!(!ok(&HEALTH_PATH, "/he alth"));
        assert!(ok(&CLIENT_NETWORK, "203.0.113.0/24") && ok(&CLIENT_NETWORK, "2001:db8::/32"));
        assert!(ok(&CLIENT_NETWORK, "198.51.100.7") && ok(&CLIENT_NETWORK, "::1"));
        for bad in ["203.0.113.5/24", "10.0.0.0/33", "example.com", "10.0.0.0/", "", "1.2.3/8"] {
            assert!(!ok(&CLIENT_NETWORK, bad), "{bad}");
        }
        assert!(ok(&LOCAL_ENV_NAME, "my_token"));
        assert!(!ok(&LOCAL_ENV_NAME, "1TOKEN"));
    }
}
