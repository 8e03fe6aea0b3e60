//! An app's files as they travel in a request: relative paths and bytes, bounded. One set of
//! bounds and one path check for every place that takes a bundle: the relay's deploy
//! (`POST /api/ingress/deployments`), the publication service's artifact upload
//! (`POST /api/applications/{id}/artifacts`) and the `svc` commands that build them
//! (`svc ingress deploy`, `svc app deploy`, `svc admin artifact store`).

use std::collections::BTreeSet;

/// The most files a bundle may carry.
pub const BUNDLE_MAX_FILES: usize = 2000;

/// The most bytes of files a bundle may carry, decoded.
pub const BUNDLE_MAX_BYTES: u64 = 12 * 1024 * 1024;

/// The deepest path of a bundle's file, in components (`lib/a.js` is 2).
pub const BUNDLE_MAX_DEPTH: usize = 32;

/// The longest path of a bundle's file, bytes; a component is at most 255 (as on Linux).
pub const BUNDLE_MAX_PATH: usize = 1024;

/// Why `path` is not a plain relative path inside the app directory: `..` or `.`, absolute,
/// empty components (`a//b`, `dir/`), control characters, more than [`BUNDLE_MAX_DEPTH`]
/// components, a component over 255 bytes, more than [`BUNDLE_MAX_PATH`] bytes.
pub fn check_bundle_path(path: &str) -> Result<(), BundlePathProblem> {
    if path.is_empty() || path.len() > BUNDLE_MAX_PATH {
        return Err(BundlePathProblem::Length);
    }
    if path.chars().any(char::is_control) {
        return Err(BundlePathProblem::Control);
    }
    let components: Vec<&str> = path.split('/').collect();
    if components.len() > BUNDLE_MAX_DEPTH {
        return Err(BundlePathProblem::Depth);
    }
    for c in components {
        if c.is_empty() || c == "." || c == ".." {
            return Err(BundlePathProblem::Outside);
        }
        if c.len() > 255 {
            return Err(BundlePathProblem::Component);
        }
    }
    Ok(())
}

/// Why a bundle's path is refused (said after the path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BundlePathProblem {
    /// Empty, or over [`BUNDLE_MAX_PATH`] bytes.
    #[error("is not a path of 1 to {BUNDLE_MAX_PATH} bytes")]
    Length,
    /// A control character.
    #[error("holds a control character")]
    Control,
    /// Over [`BUNDLE_MAX_DEPTH`] components.
    #[error("is deeper than {BUNDLE_MAX_DEPTH} components")]
    Depth,
    /// `.`, `..`, an empty component, a leading or trailing `/`.
    #[error("is not a relative path inside the app directory (no `.`, `..`, `/` at either end or `//`)")]
    Outside,
    /// A component over 255 bytes.
    #[error("has a component over 255 bytes")]
    Component,
}

/// A path that another path of the same bundle needs as a directory (`lib` beside
/// `lib/a.js`): the first such, in path order.
pub fn file_and_directory<'a>(paths: impl IntoIterator<Item = &'a str> + Clone) -> Option<&'a str> {
    let files: BTreeSet<&str> = paths.clone().into_iter().collect();
    let dirs: BTreeSet<&str> =
        paths.into_iter().flat_map(|p| p.match_indices('/').map(move |(at, _)| &p[..at])).collect();
    dirs.into_iter().find(|d| files.contains(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_plain_relative_and_bounded() {
        for ok in ["a", "lib/a.js", ".well-known/x", &"a/".repeat(BUNDLE_MAX_DEPTH - 1)[..]] {
            let ok = ok.trim_end_matches('/');
            assert_eq!(check_bundle_path(ok), Ok(()), "{ok}");
        }
        let cases = [
            ("", BundlePathProblem::Length),
            ("/etc/passwd", BundlePathProblem::Outside),
            ("a/../b", BundlePathProblem::Outside),
            ("./a", BundlePathProblem::Outside),
            ("a//b", BundlePathProblem::Outside),
            ("dir/", BundlePathProblem::Outside),
            ("a\nb", BundlePathProblem::Control),
        ];
        for (path, why) in cases {
            assert_eq!(check_bundle_path(path), Err(why), "{path:?}");
        }
        assert_eq!(check_bundle_path("a/".repeat(BUNDLE_MAX_DEPTH).trim_end_matches('/')), Ok(()));
        assert_eq!(
            check_bundle_path("a/".repeat(BUNDLE_MAX_DEPTH + 1).trim_end_matches('/')),
            Err(BundlePathProblem::Depth)
        );
        assert_eq!(check_bundle_path(&"x".repeat(256)), Err(BundlePathProblem::Component));
        assert_eq!(check_bundle_path(&"x/".repeat(600)), Err(BundlePathProblem::Length));
    }

    #[test]
    fn a_file_another_path_needs_as_a_directory_is_found() {
        assert_eq!(file_and_directory(["lib", "lib/a.js"]), Some("lib"));
        assert_eq!(file_and_directory(["a/b", "a/b/c", "x"]), Some("a/b"));
        assert_eq!(file_and_directory(["lib/a.js", "lib.js"]), None);
    }
}
