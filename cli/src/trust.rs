//! `svc ingress trust`: makes a browser of this user trust the development CA that signs a
//! local relay's route certificates (`DIR/ca.pem`), so the demo's `ready` URL opens without a
//! certificate warning. Chromium and Chrome on Linux read the user's NSS database
//! (`$HOME/.pki/nssdb`); `certutil` (Debian's `libnss3-tools`) adds the CA there as a
//! trusted root under a nickname made from the CA's own digest, so each data directory's CA
//! has its own entry and `--remove` takes exactly that one out. Without `certutil`, the
//! command prints the exact commands to run once it is installed. curl does not read NSS:
//! the command prints its `--cacert` and `SSL_CERT_FILE` forms.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What `svc ingress trust` was asked.
pub(crate) struct TrustRequest {
    /// The CA certificate (PEM): `--ca FILE`, or `DIR/ca.pem` of `--data-dir DIR` (the demo's
    /// default data directory without either).
    pub(crate) ca: PathBuf,
    /// Take the CA out of the database instead.
    pub(crate) remove: bool,
}

/// Why the CA cannot be trusted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrustError {
    /// The CA file cannot be read.
    #[error(
        "cannot read the development CA {}: {source} (start the relay or the demo first; it writes DIR/ca.pem)",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It holds no certificate.
    #[error("{} holds no PEM certificate", path.display())]
    NotPem {
        /// The file.
        path: PathBuf,
    },
    /// `$HOME` is not set: there is no user database to write.
    #[error("HOME is not set: the NSS database is $HOME/.pki/nssdb")]
    NoHome,
    /// The database's directory cannot be made.
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `certutil` ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Certutil {
        /// The command, as it would be typed.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it said.
        stderr: String,
    },
    /// `certutil` could not be started (other than missing).
    #[error("cannot run certutil: {0}")]
    Spawn(#[source] std::io::Error),
}

crate::failure::one_line_failure!(TrustError, exit 1, "trust_failed", "svc ingress trust");

/// `svc ingress trust`
pub(crate) fn run(request: &TrustRequest) -> Result<ExitCode, TrustError> {
    // Canonical when it exists, so the commands printed name it plainly (no `dir/../..`).
    let ca = fs_err::canonicalize(&request.ca)
        .or_else(|_| std::path::absolute(&request.ca))
        .unwrap_or_else(|_| request.ca.clone());
    let pem = read_pem(&ca)?;
    if !pem.contains("-----BEGIN CERTIFICATE-----") {
        return Err(TrustError::NotPem { path: ca });
    }
    let nickname = nickname(&pem);
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).ok_or(TrustError::NoHome)?;
    let db_dir = Path::new(&home).join(".pki").join("nssdb");
    let db = format!("sql:{}", db_dir.display());
    let steps = steps(&db_dir, &db, &nickname, &ca, request.remove);
    if !certutil_present() {
        println!("certutil is not installed (Debian and Ubuntu: sudo apt-get install libnss3-tools); then run:");
        for step in &steps {
            println!("  {}", shell_words(step));
        }
        print_curl(&ca);
        return Ok(ExitCode::from(1));
    }
    let present = listed(&db, &nickname)?;
    if request.remove {
        if !present {
            println!("the development CA {} ({nickname}) was not trusted in {}", ca.display(), db_dir.display());
            return Ok(ExitCode::SUCCESS);
        }
        run_certutil(&steps[0])?;
    } else {
        if !db_dir.join("cert9.db").exists() {
            agent::files::create_private_dir(&db_dir)
                .map_err(|source| TrustError::CreateDir { path: db_dir.clone(), source })?;
            run_certutil(&steps[1])?;
        }
        // Trusted again (its file may have changed): the entry is replaced, not doubled.
        if present {
            run_certutil(&steps_remove(&db, &nickname)[0])?;
        }
        run_certutil(&steps[2])?;
    }
    if request.remove {
        println!("the development CA {} ({nickname}) is no longer trusted in {}", ca.display(), db_dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "trusted for browsers of this user: the development CA {} as \"{nickname}\" in {}",
        ca.display(),
        db_dir.display()
    );
    println!("  (Chromium and Chrome read it; restart a running browser. Firefox keeps its own store:");
    println!("  Settings, Privacy & Security, Certificates, View Certificates, Authorities, Import.)");
    print_curl(&ca);
    println!("undo: {}", undo_command(&ca));
    Ok(ExitCode::SUCCESS)
}

/// The largest CA file read: a PEM certificate is a few KiB.
const CA_MAX_BYTES: u64 = 1024 * 1024;

/// The text of the CA file at `ca`, if it is text of at most [`CA_MAX_BYTES`]: `/dev/zero` or
/// a large file given by mistake is not read whole.
fn read_pem(ca: &Path) -> Result<String, TrustError> {
    let read = |source| TrustError::Read { path: ca.to_owned(), source };
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(fs_err::File::open(ca).map_err(read)?, CA_MAX_BYTES + 1),
        &mut bytes,
    )
    .map_err(read)?;
    if bytes.len() as u64 > CA_MAX_BYTES {
        return Err(TrustError::NotPem { path: ca.to_owned() });
    }
    String::from_utf8(bytes).map_err(|_| TrustError::NotPem { path: ca.to_owned() })
}

/// The nickname of the CA in the database: `svc development CA ` and the first 12 hex
/// digits of the PEM's SHA-256, so another data directory's CA gets its own entry.
fn nickname(pem: &str) -> String {
    let digest = manifest_core::sha256(pem.trim().as_bytes());
    let hex = digest.trim_start_matches("sha256:").get(..12).unwrap_or_default();
    format!("svc development CA {hex}")
}

/// The commands that (un)trust the CA, as argument lists: make the database if it is
/// missing, then add (or delete) the CA.
fn steps(db_dir: &Path, db: &str, nickname: &str, ca: &Path, remove: bool) -> Vec<Vec<OsString>> {
    let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
    if remove {
        return steps_remove(db, nickname);
    }
    let mut add = words(&["certutil", "-A", "-d", db, "-n", nickname, "-t", "C,,", "-i"]);
    add.push(ca.as_os_str().to_owned());
    let mut mkdir = words(&["mkdir", "-p", "-m", "700"]);
    mkdir.push(db_dir.as_os_str().to_owned());
    vec![mkdir, words(&["certutil", "-N", "-d", db, "--empty-password"]), add]
}

/// The command that takes the CA out.
fn steps_remove(db: &str, nickname: &str) -> Vec<Vec<OsString>> {
    vec![["certutil", "-D", "-d", db, "-n", nickname].iter().map(OsString::from).collect()]
}

/// A command as a shell line, each word quoted when it needs to be.
fn shell_words(words: &[OsString]) -> String {
    words
        .iter()
        .map(|w| {
            let w = w.to_string_lossy();
            if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:,=@%+".contains(c)) {
                w.into_owned()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command that takes `ca` out again, as a shell line (a path with spaces or quotes
/// pasted as one word).
fn undo_command(ca: &Path) -> String {
    let words: Vec<OsString> =
        ["svc", "ingress", "trust", "--ca"].iter().map(OsString::from).chain([ca.as_os_str().to_owned()]).collect();
    format!("{} --remove", shell_words(&words))
}

fn print_curl(ca: &Path) {
    let ca = shell_words(&[ca.as_os_str().to_owned()]);
    println!("curl reads no browser store; give it the CA:");
    println!("  curl --cacert {ca} https://node-demo-acme.localhost:8443/   (the demo's URL: any route of the relay)");
    println!(
        "  export SSL_CERT_FILE={ca}   (curl, and other OpenSSL programs, then trust it; node: NODE_EXTRA_CA_CERTS)"
    );
}

fn certutil_present() -> bool {
    match Command::new("certutil").arg("-H").output() {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// Whether the database holds `nickname`.
fn listed(db: &str, nickname: &str) -> Result<bool, TrustError> {
    let out = Command::new("certutil").args(["-L", "-d", db, "-n", nickname]).output().map_err(TrustError::Spawn)?;
    Ok(out.status.success())
}

fn run_certutil(step: &[OsString]) -> Result<(), TrustError> {
    let out = Command::new(&step[0]).args(&step[1..]).output().map_err(TrustError::Spawn)?;
    if out.status.success() {
        return Ok(());
    }
    Err(TrustError::Certutil {
        command: shell_words(step),
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_quote_what_a_shell_would_split() {
        let ca = Path::new("/tmp/my data/ca.pem");
        let db_dir = Path::new("/home/u/.pki/nssdb");
        let add = steps(db_dir, "sql:/home/u/.pki/nssdb", "svc development CA 0123456789ab", ca, false);
        let lines: Vec<String> = add.iter().map(|s| shell_words(s)).collect();
        assert_eq!(
            lines,
            [
                "mkdir -p -m 700 /home/u/.pki/nssdb",
                "certutil -N -d sql:/home/u/.pki/nssdb --empty-password",
                "certutil -A -d sql:/home/u/.pki/nssdb -n 'svc development CA 0123456789ab' -t C,, \
                 -i '/tmp/my data/ca.pem'",
            ]
        );
        let remove = steps(Path::new("/db"), "sql:/db", "svc development CA x", Path::new("/ca.pem"), true);
        assert_eq!(shell_words(&remove[0]), "certutil -D -d sql:/db -n 'svc development CA x'");
    }

    #[test]
    fn the_undo_command_quotes_a_path_with_spaces_or_quotes() {
        assert_eq!(
            undo_command(Path::new("/tmp/my data/-ca 'q\".pem")),
            r#"svc ingress trust --ca '/tmp/my data/-ca '\''q".pem' --remove"#
        );
        assert_eq!(undo_command(Path::new("/r/ca.pem")), "svc ingress trust --ca /r/ca.pem --remove");
    }

    #[test]
    fn a_ca_path_to_dev_zero_or_a_binary_file_is_not_pem_and_not_read_whole() {
        // Unbounded, /dev/zero was read until memory ran out.
        let e = read_pem(Path::new("/dev/zero")).expect_err("not a certificate");
        assert!(matches!(e, TrustError::NotPem { .. }), "{e}");
        let dir = tempfile::tempdir().expect("a directory");
        let binary = dir.path().join("ca.der");
        fs_err::write(&binary, [0x30, 0x82, 0xff, 0xfe]).expect("write");
        assert!(matches!(read_pem(&binary), Err(TrustError::NotPem { .. })));
        fs_err::write(&binary, "-----BEGIN CERTIFICATE-----\n").expect("write");
        assert_eq!(read_pem(&binary).expect("text"), "-----BEGIN CERTIFICATE-----\n");
    }

    #[test]
    fn each_ca_has_its_own_nickname() {
        assert_ne!(nickname("-----BEGIN CERTIFICATE-----\na"), nickname("-----BEGIN CERTIFICATE-----\nb"));
        assert_eq!(nickname("x\n"), nickname("x"));
    }
}
