//! The fenced blocks of a Markdown document, with their info strings read as harness
//! attributes (see `docs/decisions.md`, "Executable documentation").

use std::fmt;
use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// What the harness does with a block, from its info string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// ```` ```sh ````: commands a user is told to run as written; the harness runs them.
    Run,
    /// ```` ```sh synopsis ````: the shape of a command with placeholders (`DIR`, `[--flag]`);
    /// every `svc`/`gateway-prep` subcommand and flag in it must exist.
    Synopsis,
    /// ```` ```sh manual ````: runnable, but not here (another host, nightly, benchmarks of
    /// minutes); checked like a synopsis.
    Manual,
    /// ```` ```text output ````: what the last command of the previous `sh` block prints on
    /// stdout (`[..]` matches within a line, `...` any lines).
    Output,
    /// ```` ```yaml file=NAME ```` (any language): the session writes the block to `NAME`
    /// before the blocks after it run.
    File(String),
    /// Any other block: an illustration, not checked here.
    Other,
}

/// One fenced block.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub(crate) path: PathBuf,
    pub(crate) line: usize,
    pub(crate) kind: Kind,
    /// `exit=N`: the exit code of the block's last command (every other command exits 0).
    pub(crate) exit: i32,
    /// `interrupt=TEXT`: a command still running once its output contains TEXT gets Ctrl-C
    /// (SIGINT), as a user would after reading it; `interrupt=5s` after five seconds.
    pub(crate) interrupt: Option<Interrupt>,
    pub(crate) body: String,
}

/// When a still-running command gets Ctrl-C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Interrupt {
    AfterText(String),
    AfterSecs(u64),
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.line)
    }
}

/// The blocks of `markdown` (read from `path`), in document order.
pub(crate) fn blocks(path: &Path, markdown: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    let mut body = String::new();
    for (event, range) in Parser::new(markdown).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                open = Some((line_of(markdown, range.start), info.to_string()));
                body.clear();
            }
            Event::Text(text) if open.is_some() => body.push_str(&text),
            Event::End(TagEnd::CodeBlock) => {
                if let Some((line, info)) = open.take() {
                    let at = format!("{}:{line}", path.display());
                    blocks.push(block(path, line, &info, std::mem::take(&mut body)).map_err(|e| format!("{at}: {e}"))?);
                }
            }
            _ => {}
        }
    }
    Ok(blocks)
}

fn block(path: &Path, line: usize, info: &str, body: String) -> Result<Block, String> {
    let mut words = info.split_whitespace();
    let lang = words.next().unwrap_or("");
    if lang.is_empty() {
        // A bare fence could be commands nobody runs: every block says what it is.
        return Err("a fenced block without a language: ```sh for commands, ```text for a diagram".to_owned());
    }
    let mut kind = if lang == "sh" { Kind::Run } else { Kind::Other };
    let (mut exit, mut interrupt) = (0, None);
    for word in words {
        match word.split_once('=') {
            None if lang == "sh" && word == "synopsis" => kind = Kind::Synopsis,
            None if lang == "sh" && word == "manual" => kind = Kind::Manual,
            None if lang == "text" && word == "output" => kind = Kind::Output,
            Some(("file", name)) if !name.is_empty() && !name.contains("..") && !name.starts_with('/') => {
                kind = Kind::File(name.to_owned());
            }
            Some(("exit", code)) if lang == "sh" => {
                exit = code.parse().map_err(|_| format!("exit={code:?} is not an exit code"))?;
            }
            Some(("interrupt", when)) if lang == "sh" => {
                interrupt = Some(match when.strip_suffix('s').and_then(|s| s.parse().ok()) {
                    Some(secs) => Interrupt::AfterSecs(secs),
                    None => Interrupt::AfterText(when.trim_matches('"').to_owned()),
                });
            }
            _ => return Err(format!("unknown block attribute {word:?} in ```{info}")),
        }
    }
    Ok(Block { path: path.to_owned(), line, kind, exit, interrupt, body })
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// The commands of a shell block: `\`-continued lines joined, here-documents kept whole,
/// blank and comment-only lines dropped.
pub(crate) fn commands(body: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut lines = body.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut command = line.to_owned();
        while command.ends_with('\\') {
            match lines.next() {
                Some(next) => {
                    command.push('\n');
                    command.push_str(next);
                }
                None => break,
            }
        }
        if let Some(tag) = heredoc_tag(&command) {
            for next in lines.by_ref() {
                command.push('\n');
                command.push_str(next);
                if next.trim() == tag {
                    break;
                }
            }
        }
        commands.push(command);
    }
    commands
}

fn heredoc_tag(command: &str) -> Option<String> {
    let rest = command.split_once("<<")?.1.trim_start_matches('-').trim_start();
    let tag: String =
        rest.chars().filter(|c| *c != '\'' && *c != '"').take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!tag.is_empty()).then_some(tag)
}

/// `command` without a trailing `# comment` (outside quotes), trimmed.
pub(crate) fn without_comment(command: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut previous = ' ';
    for (i, c) in command.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => return command[..i].trim(),
            _ => {}
        }
        previous = c;
    }
    command.trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_join_continuations_keep_heredocs_and_drop_comments() {
        let body = "# a comment\nsvc a \\\n  --b c   # trailing\n\npython3 - <<'PY'\nprint(1)\n# not a comment here\nPY\nsvc d &\n";
        let got = commands(body);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], "svc a \\\n  --b c   # trailing");
        assert!(got[1].ends_with("# not a comment here\nPY"), "{got:?}");
        assert_eq!(without_comment(&got[2]), "svc d &");
        assert_eq!(without_comment("echo '# kept' # dropped"), "echo '# kept'");
    }

    #[test]
    fn info_strings_become_kinds_and_unknown_attributes_are_refused() {
        let md = "```sh exit=1 interrupt=ready\nsvc x\n```\n\n```text output\nhi\n```\n\n```yaml file=m.yaml\na: 1\n```\n\n```sh synopsis\nsvc y DIR\n```\n";
        let got = blocks(Path::new("d.md"), md).expect("blocks");
        assert_eq!(got.len(), 4);
        assert_eq!((got[0].kind.clone(), got[0].exit, got[0].line), (Kind::Run, 1, 1));
        assert_eq!(got[0].interrupt, Some(Interrupt::AfterText("ready".into())));
        assert_eq!(got[1].kind, Kind::Output);
        assert_eq!(got[2].kind, Kind::File("m.yaml".into()));
        assert_eq!(got[3].kind, Kind::Synopsis);
        let err = blocks(Path::new("d.md"), "\n```sh sometimes\nx\n```\n").expect_err("refused");
        assert!(err.starts_with("d.md:2: unknown block attribute"), "{err}");
        let err = blocks(Path::new("d.md"), "```\nsvc x\n```\n").expect_err("a bare fence");
        assert!(err.contains("without a language"), "{err}");
    }
}
