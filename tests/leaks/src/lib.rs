//! Where a secret's value is found at rest. Both services seal secret values in their stores
//! (issue 40); their tests put a [`canary`] in, then ask [`found`] where it shows up: every file
//! under the data directory and, on PostgreSQL, every file of the cluster and a `pg_dumpall`
//! of it, each searched by [`leaks`] for the value as written, in hex, or in base64.
//!
//! One copy for the publication store's tests, the relay store's and the end-to-end suites,
//! so a form one of them learns to look for (a new encoding) every one of them looks for.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use base64::Engine as _;
use svc_pg_cluster::Cluster;

/// A recognisable value no file holds by chance: `canary-` and 24 random hex digits.
pub fn canary() -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).expect("the system's randomness");
    format!("canary-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The forms of `value` found in `haystack`: `raw`, `hex`, `HEX`, or `base64+N` /
/// `base64url+N` (N: the alignment, 0-2, at which a longer encoding could hold it).
pub fn leaks(haystack: &[u8], value: &str) -> Vec<String> {
    let mut forms = vec![("raw".to_owned(), value.to_owned())];
    let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
    forms.push(("hex".into(), hex.clone()));
    forms.push(("HEX".into(), hex.to_uppercase()));
    for shift in 0..3 {
        let mut shifted = vec![0u8; shift];
        shifted.extend_from_slice(value.as_bytes());
        for (name, engine) in [
            ("base64", base64::engine::general_purpose::STANDARD_NO_PAD),
            ("base64url", base64::engine::general_purpose::URL_SAFE_NO_PAD),
        ] {
            let encoded = engine.encode(&shifted);
            // The characters the shift or the bytes after it touch are left out.
            let skip = (shift * 8).div_ceil(6);
            forms.push((format!("{name}+{shift}"), encoded[skip..encoded.len() - 4].to_owned()));
        }
    }
    // Every form is ASCII, which a lossy reading keeps as it is; std's search is quick
    // through a database's megabytes where a test's own loop is not.
    let text = String::from_utf8_lossy(haystack);
    forms.into_iter().filter(|(_, form)| text.contains(form.as_str())).map(|(name, _)| name).collect()
}

/// `pg_dumpall` of `cluster`, as a backup takes it.
pub fn pg_dumpall(cluster: &Cluster) -> Vec<u8> {
    let out = std::process::Command::new(cluster.program("pg_dumpall"))
        .args(["-h", "127.0.0.1", "-U", "postgres", "-p", &cluster.port().to_string()])
        .output()
        .expect("pg_dumpall runs");
    assert!(out.status.success(), "pg_dumpall: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.len() > 1000, "a whole dump, not {} bytes", out.stdout.len());
    out.stdout
}

/// Where `value` is found, as `place (form)`: every regular file under `dir` and, with a
/// cluster, every file of the cluster and its `pg_dumpall`. Also the files read, so a test
/// can check that the store's own files were among them (a search of nothing finds nothing).
pub fn found(dir: &Path, cluster: Option<&Cluster>, value: &str) -> Found {
    let mut found = Found { places: Vec::new(), files: Vec::new() };
    let mut roots = vec![dir.to_owned()];
    if let Some(cluster) = cluster {
        roots.push(cluster.socket_dir().to_owned());
        let dump = pg_dumpall(cluster);
        found.places.extend(leaks(&dump, value).into_iter().map(|form| format!("pg_dumpall ({form})")));
    }
    while let Some(dir) = roots.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                roots.push(path);
            } else if kind.is_file()
                && let Ok(bytes) = std::fs::read(&path)
            {
                found
                    .places
                    .extend(leaks(&bytes, value).into_iter().map(|form| format!("{} ({form})", path.display())));
                found.files.push(path);
            }
        }
    }
    assert!(!found.files.is_empty(), "no file was read under {}", dir.display());
    found
}

/// What [`found`] saw.
#[derive(Debug)]
pub struct Found {
    /// Each place the value was found, with its form: empty when it is nowhere.
    pub places: Vec<String>,
    /// Every file read.
    pub files: Vec<PathBuf>,
}

impl Found {
    /// Asserts that a file whose name ends with each of `names` was read.
    pub fn read_each(&self, names: &[&str]) -> &Found {
        for name in names {
            assert!(self.files.iter().any(|p| p.ends_with(name)), "{name} read, among {:?}", self.files);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_of_a_value_is_found_and_a_near_miss_is_not() {
        let value = canary();
        let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(leaks(format!("x{value}y").as_bytes(), &value), ["raw"]);
        assert_eq!(leaks(hex.as_bytes(), &value), ["hex"]);
        assert_eq!(leaks(hex.to_uppercase().as_bytes(), &value), ["HEX"]);
        for prefix in ["", "a", "ab"] {
            let inside = format!("{prefix}{value}tail");
            let b64 = base64::engine::general_purpose::STANDARD.encode(inside.as_bytes());
            let forms = leaks(b64.as_bytes(), &value);
            assert!(forms.iter().any(|f| f.starts_with("base64+")), "base64 at {prefix:?}: {b64}: {forms:?}");
            let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(inside.as_bytes());
            assert!(!leaks(url.as_bytes(), &value).is_empty(), "base64url at {prefix:?}: {url}");
        }
        assert!(leaks(&value.as_bytes()[..value.len() - 1], &value).is_empty(), "a prefix is no leak");
    }

    #[test]
    fn found_names_the_file_and_what_it_read() {
        let dir = std::env::temp_dir().join(format!("svc-test-leaks-{}", canary()));
        std::fs::create_dir_all(dir.join("inner")).expect("a scratch directory");
        let value = canary();
        std::fs::write(dir.join("inner/db"), format!("row {value}")).expect("write");
        std::fs::write(dir.join("other"), "nothing").expect("write");
        let seen = found(&dir, None, &value);
        seen.read_each(&["db", "other"]);
        assert_eq!(seen.places, [format!("{} (raw)", dir.join("inner/db").display())]);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
