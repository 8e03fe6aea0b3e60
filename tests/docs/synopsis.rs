//! Blocks that are not run here (synopses with placeholders, commands for another host or
//! for minutes of benchmarking) still may not drift: every `svc` and `gateway-prep`
//! subcommand and flag they name must exist, every `cargo -p/--bench/--bin/--test` target
//! must be in the workspace, and every script path must be a file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::markdown::{Block, commands, without_comment};

/// What the checks need: the binaries' `--help` texts (cached) and the workspace's targets.
pub(crate) struct Checker {
    root: PathBuf,
    bin: PathBuf,
    help: BTreeMap<Vec<String>, Option<String>>,
    /// Package name to its targets (`bench:validate`, `bin:svc`, `test:ingress`, ...).
    targets: Option<BTreeMap<String, BTreeSet<String>>>,
}

impl Checker {
    pub(crate) fn new(root: &Path, bin: &Path) -> Self {
        Self { root: root.to_owned(), bin: bin.to_owned(), help: BTreeMap::new(), targets: None }
    }

    /// Every problem in `block`, each naming the command.
    pub(crate) fn check(&mut self, block: &Block) -> Vec<String> {
        let mut problems = Vec::new();
        for command in commands(&block.body) {
            let command = without_comment(&command).replace("\\\n", " ");
            for segment in command.split(['|', ';', '&']).map(str::trim).filter(|s| !s.is_empty()) {
                let words: Vec<&str> =
                    segment.split_whitespace().skip_while(|w| w.contains('=') && !w.starts_with('-')).collect();
                let problem = match words.first().copied() {
                    Some(program @ ("svc" | "gateway-prep")) => self.check_cli(program, &words[1..]),
                    Some("cargo") => self.check_cargo(&words[1..]),
                    Some(script) if script.contains('/') && !script.starts_with('/') => {
                        let path = self.root.join(script);
                        (!path.is_file()).then(|| format!("{script} is not a file of the repository"))
                    }
                    _ => None,
                };
                if let Some(problem) = problem {
                    problems.push(format!("{block}: `{segment}`: {problem}"));
                }
            }
        }
        problems
    }

    fn check_cli(&mut self, program: &str, args: &[&str]) -> Option<String> {
        let mut path = vec![program.to_owned()];
        let mut help = self.help_of(&path)?;
        for word in
            args.iter().take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-'))
        {
            if !subcommands(&help).contains(*word) {
                break;
            }
            path.push((*word).to_owned());
            help = match self.help_of(&path) {
                Some(help) => help,
                None => return Some(format!("`{} --help` fails", path.join(" "))),
            };
        }
        if path.len() == 1 && args.first().is_some_and(|w| !w.starts_with('-')) {
            return Some(format!("{program} has no subcommand {:?}", args[0]));
        }
        let unknown: Vec<String> = args.iter().filter_map(|w| flag(w)).filter(|f| !mentions_flag(&help, f)).collect();
        (!unknown.is_empty()).then(|| format!("`{} --help` lists no {}", path.join(" "), unknown.join(", ")))
    }

    fn help_of(&mut self, path: &[String]) -> Option<String> {
        if let Some(cached) = self.help.get(path) {
            return cached.clone();
        }
        let output = Command::new(self.bin.join(&path[0])).args(&path[1..]).arg("--help").output().ok();
        let help = output.filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        self.help.insert(path.to_vec(), help.clone());
        help
    }

    fn check_cargo(&mut self, args: &[&str]) -> Option<String> {
        let targets = self.targets()?;
        let package = args.windows(2).find(|w| w[0] == "-p").map(|w| w[1].to_owned());
        if let Some(package) = &package
            && !targets.contains_key(package)
        {
            return Some(format!("no workspace package {package:?}"));
        }
        for pair in args.windows(2) {
            let kind = match pair[0] {
                "--bench" => "bench",
                "--bin" => "bin",
                "--test" => "test",
                _ => continue,
            };
            let wanted = format!("{kind}:{}", pair[1]);
            let found = match &package {
                Some(p) => targets[p].contains(&wanted),
                None => targets.values().any(|t| t.contains(&wanted)),
            };
            if !found {
                return Some(format!("no {kind} target {:?}", pair[1]));
            }
        }
        None
    }

    fn targets(&mut self) -> Option<&BTreeMap<String, BTreeSet<String>>> {
        if self.targets.is_none() {
            let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
                .current_dir(&self.root)
                .output()
                .ok()?;
            let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
            let mut targets = BTreeMap::new();
            for package in metadata["packages"].as_array()? {
                let names: BTreeSet<String> = package["targets"]
                    .as_array()?
                    .iter()
                    .flat_map(|t| {
                        let name = t["name"].as_str().unwrap_or_default().to_owned();
                        let kinds = t["kind"].as_array().cloned().unwrap_or_default();
                        kinds.into_iter().filter_map(move |k| Some(format!("{}:{name}", k.as_str()?)))
                    })
                    .collect();
                targets.insert(package["name"].as_str()?.to_owned(), names);
            }
            self.targets = Some(targets);
        }
        self.targets.as_ref()
    }
}

/// The subcommands a clap help text lists under `Commands:`.
fn subcommands(help: &str) -> BTreeSet<&str> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// `--name` from a word such as `--name`, `[--name`, `--name=VALUE` or `--name]`.
fn flag(word: &str) -> Option<String> {
    let word = word.trim_start_matches(['[', '(']);
    let name = word.strip_prefix("--")?;
    let name: String = name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    (!name.is_empty()).then(|| format!("--{name}"))
}

fn mentions_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        let next = help[i + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_from_synopsis_words() {
        assert_eq!(flag("[--ttl-secs").as_deref(), Some("--ttl-secs"));
        assert_eq!(flag("--format=json]").as_deref(), Some("--format"));
        assert_eq!(flag("-p"), None);
        assert!(mentions_flag("  --data-dir <DIR>  x\n", "--data-dir"));
        assert!(!mentions_flag("  --data-dir-x <DIR>\n", "--data-dir"));
        let help = "Usage: svc\n\nCommands:\n  manifest  Manifests\n  serve     Serve\n\nOptions:\n";
        assert_eq!(subcommands(help), BTreeSet::from(["manifest", "serve"]));
    }
}
