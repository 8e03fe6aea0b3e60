//! String formats of both manifest versions: each is a check function plus the same rule as a
//! regular expression for JSON Schema. The regexes use only syntax common to ECMA-262 and
//! Python `re` (no `\p{}`, no lookbehind). `tests/formats.rs` checks each pair agrees on many
//! samples.

use crate::shape::Pattern;

fn all(s: &str, f: impl Fn(u8) -> bool) -> bool {
    s.bytes().all(f)
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Digits with no leading zero (`0` itself allowed).
fn canonical_digits(s: &str) -> bool {
    !s.is_empty() && all(s, |b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
}

/// V4 `applicationId`: 1-64 of lowercase letters, digits, `.`, `_`, `-`, starting with a letter
/// or digit.
pub static APPLICATION_ID_V4: Pattern = Pattern {
    describe: "1-64 lowercase letters, digits, `.`, `_` or `-`, starting with a letter or digit",
    regex: "^[a-z0-9][a-z0-9._-]{0,63}$",
    check: |s| {
        (1..=64).contains(&s.len())
            && s.as_bytes().first().is_some_and(|&b| is_lower_alnum(b))
            && all(s, |b| is_lower_alnum(b) || b"._-".contains(&b))
    },
    exact: true,
};

/// V5 `applicationId`: an organization-local slug.
pub static APPLICATION_ID_V5: Pattern = Pattern {
    describe: "1-63 lowercase letters, digits or hyphens",
    regex: "^[a-z0-9-]{1,63}$",
    check: |s| (1..=63).contains(&s.len()) && all(s, |b| is_lower_alnum(b) || b == b'-'),
    exact: true,
};

/// V5 metadata label.
pub static LABEL: Pattern = Pattern {
    describe: "a label: a lowercase letter or digit, then up to 62 of lowercase letters, digits, `.`, `_`, `-`",
    regex: "^[a-z0-9][a-z0-9._-]{0,62}$",
    check: |s| {
        (1..=63).contains(&s.len())
            && s.as_bytes().first().is_some_and(|&b| is_lower_alnum(b))
            && all(s, |b| is_lower_alnum(b) || b"._-".contains(&b))
    },
    exact: true,
};

/// `owner/repository` on the code host.
pub static REPOSITORY: Pattern = Pattern {
    describe: "`owner/repository`",
    regex: "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
    check: |s| {
        let part = |p: &str| !p.is_empty() && all(p, |b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        s.split_once('/').is_some_and(|(o, r)| part(o) && part(r))
    },
    exact: true,
};

/// A git ref such as `refs/heads/main`.
pub static GIT_REF: Pattern = Pattern {
    describe: "a git ref such as `refs/heads/main` (no white space)",
    regex: "^refs/[^ \\t\\n\\f\\r]+$",
    check: |s| s.strip_prefix("refs/").is_some_and(|r| !r.is_empty() && all(r, |b| !b.is_ascii_whitespace())),
    exact: true,
};

/// `owner/repository/<workflow_path>@<ref>`.
pub static WORKFLOW_REF: Pattern = Pattern {
    describe: "`owner/repository/<workflow_path>@<ref>`, each part non-empty",
    regex: "^[^/@]+/[^/@]+/[^@]+@[^@]+$",
    check: |s| {
        let Some((path, git_ref)) = s.split_once('@') else {
            return false;
        };
        if git_ref.is_empty() || git_ref.contains('@') {
            return false;
        }
        let mut parts = path.splitn(3, '/');
        let (Some(owner), Some(repo), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        !owner.is_empty() && !repo.is_empty() && !file.is_empty()
    },
    exact: true,
};

/// V4 `builder.manifestPath`: a safe repository-relative path.
pub static SAFE_RELATIVE_PATH: Pattern = Pattern {
    describe: "a repository-relative path: no leading `/`, no `\\`, no empty, `.` or `..` segment",
    // `^SEG(/SEG)*$`, SEG being neither `.` nor `..` and free of `/` and `\`.
    regex: "^(?:[^/\\\\.][^/\\\\]*|\\.[^/\\\\.][^/\\\\]*|\\.\\.[^/\\\\]+)(?:/(?:[^/\\\\.][^/\\\\]*|\\.[^/\\\\.][^/\\\\]*|\\.\\.[^/\\\\]+))*$",
    check: |s| {
        !s.is_empty() && !s.contains('\\') && s.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
    },
    exact: true,
};

/// V5 javascript `entrypoint.file`: relative to the artifact root, no `..` segment.
pub static ENTRYPOINT_FILE: Pattern = Pattern {
    describe: "a path relative to the artifact root: must not begin with `/` or contain a `..` segment",
    regex: "^(?:[^/.][^/]*|\\.[^/.][^/]*|\\.\\.[^/]+|\\.)(?:/(?:[^/.][^/]*|\\.[^/.][^/]*|\\.\\.[^/]+|\\.)?)*$",
    check: |s| !s.is_empty() && !s.starts_with('/') && s.split('/').all(|seg| seg != ".."),
    exact: true,
};

/// An absolute file path.
pub static ABSOLUTE_PATH: Pattern = Pattern {
    describe: "an absolute path beginning with `/`",
    regex: "^/[\\s\\S]",
    check: |s| s.len() > 1 && s.starts_with('/'),
    exact: true,
};

/// An HTTP path.
pub static HTTP_PATH: Pattern =
    Pattern { describe: "an HTTP path beginning with `/`", regex: "^/", check: |s| s.starts_with('/'), exact: true };

/// A canonical IPFS address.
pub static IPFS_CID: Pattern = Pattern {
    describe: "a canonical `ipfs://<cid>` (CIDv0 `Qm...` or CIDv1 base32 `b...`), nothing after the CID",
    regex: "^ipfs://(?:Qm[1-9A-HJ-NP-Za-km-z]{44}|b[a-z2-7]{58,})$",
    check: |s| {
        let Some(cid) = s.strip_prefix("ipfs://") else {
            return false;
        };
        if let Some(v0) = cid.strip_prefix("Qm") {
            v0.len() == 44 && all(v0, |b| b.is_ascii_alphanumeric() && !b"0OIl".contains(&b))
        } else if let Some(v1) = cid.strip_prefix('b') {
            v1.len() >= 58 && all(v1, |b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
        } else {
            false
        }
    },
    exact: true,
};

/// `sha256:` and 64 lowercase hex digits.
pub static SHA256_DIGEST: Pattern = Pattern {
    describe: "`sha256:` followed by 64 lowercase hex digits",
    regex: "^sha256:[0-9a-f]{64}$",
    check: |s| {
        s.strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && all(h, |b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    },
    exact: true,
};

/// An unsigned base-10 integer string (V4 planck amounts).
pub static DECIMAL_STRING: Pattern = Pattern {
    describe: "an unsigned base-10 integer string without leading zeros, such as \"1500000000\"",
    regex: "^(?:0|[1-9][0-9]*)$",
    check: canonical_digits,
    exact: true,
};

/// V5 money: `0|[1-9][0-9]{0,24}`.
pub static MONEY: Pattern = Pattern {
    describe: "a money string: `0` or up to 25 digits without a leading zero, such as \"1000000\"",
    regex: "^(?:0|[1-9][0-9]{0,24})$",
    check: |s| canonical_digits(s) && s.len() <= 25,
    exact: true,
};

/// ISO 3166-1 alpha-2 country code.
pub static COUNTRY: Pattern = Pattern {
    describe: "an uppercase two-letter country code (ISO 3166-1 alpha-2)",
    regex: "^[A-Z]{2}$",
    check: |s| s.len() == 2 && all(s, |b| b.is_ascii_uppercase()),
    exact: true,
};

/// A versioned catalog name, ending in `.v<digits>`.
pub static VERSIONED_CATALOG: Pattern = Pattern {
    describe: "a versioned catalog name ending in `.v<number>`, such as `svc-regions.v1`",
    regex: "^[^\\n]+\\.v[0-9]+$",
    check: |s| {
        s.rsplit_once(".v").is_some_and(|(name, v)| {
            !name.is_empty() && !name.contains('\n') && !v.is_empty() && all(v, |b| b.is_ascii_digit())
        })
    },
    exact: true,
};

/// V4 runtime variable name.
pub static VARIABLE_NAME_V4: Pattern = Pattern {
    describe: "a variable name: a letter or `_`, then up to 127 letters, digits or `_`",
    regex: "^[A-Za-z_][A-Za-z0-9_]{0,127}$",
    check: |s| {
        (1..=128).contains(&s.len())
            && s.as_bytes().first().is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
            && all(s, |b| b.is_ascii_alphanumeric() || b == b'_')
    },
    exact: true,
};

/// V5 environment name.
pub static ENV_NAME_V5: Pattern = Pattern {
    describe: "an environment name: `A-Z` or `_`, then up to 127 of `A-Z`, `0-9`, `_`",
    regex: "^[A-Z_][A-Z0-9_]{0,127}$",
    check: |s| {
        (1..=128).contains(&s.len())
            && s.as_bytes().first().is_some_and(|&b| b.is_ascii_uppercase() || b == b'_')
            && all(s, |b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    },
    exact: true,
};

/// Secret ID: 1-127 letters, digits, dot, underscore, hyphen.
pub static SECRET_ID: Pattern = Pattern {
    describe: "1-127 letters, digits, `.`, `_` or `-`",
    regex: "^[A-Za-z0-9._-]{1,127}$",
    check: |s| (1..=127).contains(&s.len()) && all(s, |b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
    exact: true,
};

/// V5 native image version: a one- to three-part numeric floor.
pub static IMAGE_VERSION: Pattern = Pattern {
    describe: "a one- to three-part numeric version such as `20`, `20.11` or `20.11.1`",
    regex: "^[0-9]+(?:\\.[0-9]+){0,2}$",
    check: |s| {
        let parts: Vec<&str> = s.split('.').collect();
        parts.len() <= 3 && parts.iter().all(|p| !p.is_empty() && all(p, |b| b.is_ascii_digit()))
    },
    exact: true,
};

const DURATION_UNITS: [&str; 5] = ["ms", "s", "m", "h", "d"];

fn duration_parts(s: &str) -> Option<(&str, &str)> {
    let unit_at = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(unit_at);
    (canonical_digits(n) && DURATION_UNITS.contains(&unit)).then_some((n, unit))
}

/// V5 duration: one integer and a unit.
pub static DURATION: Pattern = Pattern {
    describe: "a duration: one integer without leading zeros and a unit `ms`, `s`, `m`, `h` or `d`, such as `30d`",
    regex: "^(?:0|[1-9][0-9]*)(?:ms|s|m|h|d)$",
    check: |s| duration_parts(s).is_some(),
    exact: true,
};

/// V5 positive duration (`schedule.duration`, `every`).
pub static POSITIVE_DURATION: Pattern = Pattern {
    describe: "a positive duration: an integer from 1 without leading zeros and a unit `ms`, `s`, `m`, `h` or `d`, such as `1h`",
    regex: "^[1-9][0-9]*(?:ms|s|m|h|d)$",
    check: |s| duration_parts(s).is_some_and(|(n, _)| n != "0"),
    exact: true,
};

/// V5 byte size: one integer and a unit.
pub static BYTE_SIZE: Pattern = Pattern {
    describe: "a byte size: one integer without leading zeros and a unit `B`, `KiB`, `MiB`, `GiB`, `TiB`, `KB`, `MB`, `GB` or `TB`, such as `512MiB`",
    regex: "^(?:0|[1-9][0-9]*)(?:B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)$",
    check: |s| {
        let Some(unit_at) = s.find(|c: char| !c.is_ascii_digit()) else {
            return false;
        };
        let (n, unit) = s.split_at(unit_at);
        canonical_digits(n) && ["B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"].contains(&unit)
    },
    exact: true,
};

/// Milliseconds of a V5 duration (`90s`, `1h`); `None` if it is not one. humantime reads the
/// same units (`ms`, `s`, `m`, `h`, `d`) once the format has said it is one.
pub fn duration_ms(text: &str) -> Option<u128> {
    (DURATION.check)(text).then(|| humantime::parse_duration(text).ok().map(|d| d.as_millis()))?
}

/// Bytes of a V5 byte size (`512MiB`, `1GB`); `None` if it is not one or does not fit.
pub fn byte_size(text: &str) -> Option<u128> {
    let at = text.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = text.split_at(at);
    let n: u128 = n.parse().ok()?;
    let scale: u128 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// V5 UTC bound: exactly `YYYY-MM-DDTHH:MM:SSZ`, a real date and time.
pub static UTC_BOUND: Pattern = Pattern {
    describe: "a UTC time exactly `YYYY-MM-DDTHH:MM:SSZ` on a real date, such as `2027-01-31T00:00:00Z`",
    regex: "^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$",
    check: is_utc_bound,
    // The regex cannot know February 30 is not a date.
    exact: false,
};

fn is_utc_bound(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z'
    {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        all(part, |c| c.is_ascii_digit()).then(|| part.parse().ok()).flatten()
    };
    let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(se)) =
        (num(0..4), num(5..7), num(8..10), num(11..13), num(14..16), num(17..19))
    else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d) && h < 24 && mi < 60 && se < 60
}

/// Every format, by name (for tests and schema generation).
pub static ALL: &[(&str, &Pattern)] = &[
    ("APPLICATION_ID_V4", &APPLICATION_ID_V4),
    ("APPLICATION_ID_V5", &APPLICATION_ID_V5),
    ("LABEL", &LABEL),
    ("REPOSITORY", &REPOSITORY),
    ("GIT_REF", &GIT_REF),
    ("WORKFLOW_REF", &WORKFLOW_REF),
    ("SAFE_RELATIVE_PATH", &SAFE_RELATIVE_PATH),
    ("ENTRYPOINT_FILE", &ENTRYPOINT_FILE),
    ("ABSOLUTE_PATH", &ABSOLUTE_PATH),
    ("HTTP_PATH", &HTTP_PATH),
    ("IPFS_CID", &IPFS_CID),
    ("SHA256_DIGEST", &SHA256_DIGEST),
    ("DECIMAL_STRING", &DECIMAL_STRING),
    ("MONEY", &MONEY),
    ("COUNTRY", &COUNTRY),
    ("VERSIONED_CATALOG", &VERSIONED_CATALOG),
    ("VARIABLE_NAME_V4", &VARIABLE_NAME_V4),
    ("ENV_NAME_V5", &ENV_NAME_V5),
    ("SECRET_ID", &SECRET_ID),
    ("IMAGE_VERSION", &IMAGE_VERSION),
    ("DURATION", &DURATION),
    ("POSITIVE_DURATION", &POSITIVE_DURATION),
    ("BYTE_SIZE", &BYTE_SIZE),
    ("UTC_BOUND", &UTC_BOUND),
];

/// Values an editor offers for a format (`svc lsp`'s completion), each accepted by the
/// format's check (a test holds them to it). A duration's or a byte size's examples carry
/// every unit, so the units of a number being typed come from here too.
pub static EXAMPLES: &[(&Pattern, &[&str])] = &[
    (&DURATION, &["0s", "500ms", "30s", "5m", "1h", "24h", "7d", "30d"]),
    (&POSITIVE_DURATION, &["500ms", "30s", "5m", "1h", "24h", "7d", "30d"]),
    (&BYTE_SIZE, &["512B", "64KiB", "256MiB", "512MiB", "1GiB", "10GiB", "1TiB", "500KB", "100MB", "1GB", "1TB"]),
    (&VERSIONED_CATALOG, &["svc-regions.v1"]),
];

/// The values an editor offers for `pattern` (none for most formats: a name or a digest
/// has no likely value).
pub fn examples(pattern: &Pattern) -> &'static [&'static str] {
    EXAMPLES.iter().find(|(p, _)| std::ptr::eq(*p, pattern)).map_or(&[], |(_, values)| values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_refuse() {
        let cases: &[(&Pattern, &str, bool)] = &[
            (&DURATION, "0s", true),
            (&DURATION, "30d", true),
            (&DURATION, "05m", false),
            (&DURATION, "10", false),
            (&DURATION, "1.5h", false),
            (&POSITIVE_DURATION, "0s", false),
            (&POSITIVE_DURATION, "1ms", true),
            (&BYTE_SIZE, "512MiB", true),
            (&BYTE_SIZE, "512mib", false),
            (&MONEY, "0", true),
            (&MONEY, "01", false),
            (&MONEY, &"9".repeat(25), true),
            (&MONEY, &"9".repeat(26), false),
            (&UTC_BOUND, "2028-02-29T23:59:59Z", true),
            (&UTC_BOUND, "2027-02-29T00:00:00Z", false),
            (&UTC_BOUND, "2027-02-30T00:00:00Z", false),
            (&UTC_BOUND, "2027-01-01T00:00:00", false),
            (&UTC_BOUND, "2027-01-01T24:00:00Z", false),
            (&SAFE_RELATIVE_PATH, "svc/manifest.json", true),
            (&SAFE_RELATIVE_PATH, "./manifest.json", false),
            (&SAFE_RELATIVE_PATH, "a//b", false),
            (&SAFE_RELATIVE_PATH, "a\\b", false),
            (&SAFE_RELATIVE_PATH, "/abs", false),
            (&SAFE_RELATIVE_PATH, "...", true),
            (&ENTRYPOINT_FILE, "dist/server.js", true),
            (&ENTRYPOINT_FILE, "../x.js", false),
            (&ENTRYPOINT_FILE, "a/../x.js", false),
            (&ENTRYPOINT_FILE, "/x.js", false),
            (&ENTRYPOINT_FILE, "..x/y.js", true),
            (&WORKFLOW_REF, "acme/shop/.github/workflows/build.yml@refs/heads/main", true),
            (&WORKFLOW_REF, "acme/shop@refs/heads/main", false),
            (&IPFS_CID, "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", true),
            (&IPFS_CID, "ipfs://QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", true),
            (&IPFS_CID, "ipfs://bafy/path", false),
            (&IMAGE_VERSION, "20.11.1", true),
            (&IMAGE_VERSION, "20.11.1.1", false),
            (&VERSIONED_CATALOG, "svc-regions.v1", true),
            (&VERSIONED_CATALOG, "svc-regions", false),
        ];
        for (p, s, ok) in cases {
            assert_eq!((p.check)(s), *ok, "{} on {s:?}", p.regex);
        }
    }

    #[test]
    fn every_example_an_editor_offers_is_accepted_by_its_format() {
        for (pattern, values) in EXAMPLES {
            assert!(!values.is_empty(), "{}", pattern.regex);
            for value in *values {
                assert!((pattern.check)(value), "{value:?} offered for {}", pattern.regex);
            }
        }
        assert_eq!(examples(&DURATION)[2], "30s");
        assert!(examples(&SECRET_ID).is_empty());
    }
}
