//! How both consoles show the texts that would otherwise break their layout:
//!
//! - [`id`]: a long identifier (an execution, deployment, session or token ID, a digest)
//!   shortened on screen by [`short`]'s rule, with the whole value in its `title` (on hover),
//!   in its text (what a selection copies, what a screen reader reads) and selected whole by
//!   a click (`user-select: all`) or when it takes the keyboard's focus (the console's script);
//! - [`prose`]: a message written for the terminal (`run `svc ...``), its backtick spans as
//!   `<code>`, everything else escaped, never a literal backtick;
//! - [`runs`] and [`repeated`]: consecutive rows alike (the same refusal six times) as one
//!   row with its count (`×6`) and its first and last time.

use maud::{Markup, html};

/// An identifier longer than this many characters (before any `/` part) is shortened.
const LONG: usize = 20;

/// Characters kept after an identifier's kind prefix (`app_`, `dep_`, `sha256:`).
const HEAD: usize = 8;

/// Characters kept at the end.
const TAIL: usize = 4;

/// How an identifier is shortened: `(head, cut, tail)`, the three parts that make it whole;
/// `cut` is what the screen hides (and shows as `…`), empty when nothing is.
///
/// The rule: the part before the first `/` (an execution ID's application UID; the whole of
/// any other ID) longer than 20 characters keeps its kind prefix (up to and including a `_`
/// or `:` within its first 8 characters), the next 8 characters, and its last 4; the part
/// from the first `/` on (an execution's `/slot/generation/attempt`) is kept whole.
/// `app_0f3a9c1d27e84b6b9d1e5a7c3b2e4f60/0/1/3` shows as `app_0f3a9c1d…4f60/0/1/3`,
/// `sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae` as
/// `sha256:2c26b46b…e7ae`.
pub fn short(value: &str) -> (&str, &str, &str) {
    let base_end = value.find('/').unwrap_or(value.len());
    let base = &value[..base_end];
    let chars: Vec<(usize, char)> = base.char_indices().collect();
    if chars.len() <= LONG {
        return (value, "", "");
    }
    let prefix = chars.iter().take(8).position(|&(_, c)| c == '_' || c == ':').map_or(0, |i| i + 1);
    let keep = prefix + HEAD;
    let tail_from = chars.len() - TAIL;
    if keep >= tail_from {
        return (value, "", "");
    }
    let (cut_at, tail_at) = (chars[keep].0, chars[tail_from].0);
    (&value[..cut_at], &value[cut_at..tail_at], &value[tail_at..])
}

/// A long identifier, shortened on screen ([`short`]), whole in its `title` and its text: a
/// click selects it whole (copy it with Ctrl-C), and so does focusing it with the keyboard.
pub fn id(value: &str) -> Markup {
    let (head, cut, tail) = short(value);
    html! {
        @if cut.is_empty() {
            code.id title=(value) { (value) }
        } @else {
            code.id.short title=(value) tabindex="0" {
                span.id-head { (head) } span.id-cut { (cut) } span.id-tail { (tail) }
            }
        }
    }
}

/// A text written for people at a terminal, for a page: each `` `code` `` span becomes a
/// `<code>` element, the rest is escaped text. A backtick left without its pair (a text cut
/// short) is dropped rather than shown.
pub fn prose(text: &str) -> Markup {
    let parts: Vec<&str> = text.split('`').collect();
    // An even number of parts means an odd number of backticks: the last one has no pair, and
    // what follows it is plain text.
    let paired = if parts.len().is_multiple_of(2) { parts.len() - 1 } else { parts.len() };
    html! {
        @for (i, part) in parts.iter().enumerate() {
            @if i % 2 == 1 && i < paired {
                @if !part.is_empty() { code { (part) } }
            } @else {
                (part)
            }
        }
    }
}

/// Consecutive items alike, as one: the first and the last of them and how many they are.
#[derive(Debug)]
pub struct Run<'a, T> {
    /// The first item of the run (in the list's order).
    pub first: &'a T,
    /// The last one (the same as `first` for a run of one).
    pub last: &'a T,
    /// How many items the run holds, at least 1.
    pub count: usize,
}

/// `items` with each stretch of consecutive items of one key folded into a [`Run`], in order.
/// An item whose key is `None` is never folded (a row whose differences matter).
pub fn runs<'a, T, K: PartialEq>(items: &'a [T], key: impl Fn(&'a T) -> Option<K>) -> Vec<Run<'a, T>> {
    let mut out: Vec<Run<'a, T>> = Vec::new();
    let mut last_key: Option<K> = None;
    for item in items {
        let k = key(item);
        match (out.last_mut(), &k, &last_key) {
            (Some(run), Some(k), Some(previous)) if k == previous => {
                run.last = item;
                run.count += 1;
            }
            _ => out.push(Run { first: item, last: item, count: 1 }),
        }
        last_key = k;
    }
    out
}

/// A run's count (`×6`, titled with its times `from` one `to` the other), or nothing for a
/// run of one.
pub fn repeated<T>(run: &Run<'_, T>, time: impl Fn(&T) -> String) -> Markup {
    html! {
        @if run.count > 1 {
            @let (a, b) = (time(run.first), time(run.last));
            @let (from, to) = if a <= b { (a, b) } else { (b, a) };
            " " abbr.repeat title={ (run.count) " times in a row, from " (from) " to " (to) } { "×" (run.count) }
            " " span.repeat-span.muted { span.time { (from) } " to " span.time { (to) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_id_keeps_its_kind_its_first_8_and_last_4_characters() {
        let execution = "app_0f3a9c1d27e84b6b9d1e5a7c3b2e4f60/0/1/3";
        assert_eq!(short(execution), ("app_0f3a9c1d", "27e84b6b9d1e5a7c3b2e", "4f60/0/1/3"));
        let digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
        let (head, cut, tail) = short(digest);
        assert_eq!((head, tail), ("sha256:2c26b46b", "e7ae"));
        assert_eq!(format!("{head}{cut}{tail}"), digest, "the three parts make it whole");
        // Without a kind prefix: the first 8.
        assert_eq!(short("0123456789abcdef0123456789"), ("01234567", "89abcdef012345", "6789"));
        // Short enough: whole.
        assert_eq!(short("dep_0123456789abcdef"), ("dep_0123456789abcdef", "", ""));
        assert_eq!(short("tok_6f42"), ("tok_6f42", "", ""));
        // Characters, not bytes.
        let (head, cut, tail) = short("ééééééééééééééééééééééé");
        assert_eq!((head.chars().count(), cut.chars().count(), tail.chars().count()), (8, 11, 4));
    }

    #[test]
    fn an_id_shows_short_with_the_whole_value_in_its_title_and_text() {
        let execution = "app_0f3a9c1d27e84b6b9d1e5a7c3b2e4f60/0/1/3";
        let html = id(execution).into_string();
        assert_eq!(
            html,
            format!(
                r#"<code class="id short" title="{execution}" tabindex="0"><span class="id-head">app_0f3a9c1d</span><span class="id-cut">27e84b6b9d1e5a7c3b2e</span><span class="id-tail">4f60/0/1/3</span></code>"#
            )
        );
        assert_eq!(id("tok_6f42").into_string(), r#"<code class="id" title="tok_6f42">tok_6f42</code>"#);
        let hostile = id("<script>\"x\"</script>-------------------").into_string();
        assert!(!hostile.contains("<script>") && hostile.contains("&lt;script&gt;&quot;x&quot;"), "{hostile}");
    }

    #[test]
    fn backtick_spans_become_code_and_nothing_else_is_markup() {
        let html = |t: &str| prose(t).into_string();
        assert_eq!(
            html("run `svc admin spend-authority set` first"),
            "run <code>svc admin spend-authority set</code> first"
        );
        assert_eq!(html("`a` and `b`"), "<code>a</code> and <code>b</code>");
        assert_eq!(html("no code here"), "no code here");
        assert_eq!(html("<b>`<i>`</b>"), "&lt;b&gt;<code>&lt;i&gt;</code>&lt;/b&gt;");
        // A backtick without its pair is dropped, the text after it stays plain.
        assert_eq!(html("starts with `svc_"), "starts with svc_");
        assert_eq!(html("`a` then `b"), "<code>a</code> then b");
        assert_eq!(html("empty `` span"), "empty  span");
        for t in ["`", "``", "```", "a`b`c`d", "`x` `y` `"] {
            assert!(!html(t).contains('`'), "{t:?} gave {}", html(t));
        }
    }

    #[test]
    fn consecutive_alike_items_fold_into_one_run_with_its_count() {
        let rows = [("refused", 1), ("refused", 2), ("refused", 3), ("ready", 4), ("refused", 5), ("refused", 6)];
        let folded = runs(&rows, |r| Some(r.0));
        let shape: Vec<(usize, i32, i32)> = folded.iter().map(|r| (r.count, r.first.1, r.last.1)).collect();
        assert_eq!(shape, vec![(3, 1, 3), (1, 4, 4), (2, 5, 6)]);
        // A row without a key is never folded.
        let folded = runs(&rows, |r| (r.0 == "ready").then_some(r.0));
        assert_eq!(folded.len(), rows.len());
        assert!(runs::<(&str, i32), &str>(&[], |r| Some(r.0)).is_empty());
    }

    #[test]
    fn a_run_shows_its_count_and_its_first_and_last_time() {
        let rows = [("refused", "12:00:06"), ("refused", "12:00:01")];
        let folded = runs(&rows, |r| Some(r.0));
        let html = repeated(&folded[0], |r| r.1.to_owned()).into_string();
        assert!(html.contains(">×2</abbr>"), "{html}");
        assert!(html.contains(r#"title="2 times in a row, from 12:00:01 to 12:00:06""#), "{html}");
        assert!(html.contains(r#"<span class="time">12:00:01</span> to <span class="time">12:00:06</span>"#), "{html}");
        let one = runs(&rows[..1], |r| Some(r.0));
        assert_eq!(repeated(&one[0], |r| r.1.to_owned()).into_string(), "");
    }
}
