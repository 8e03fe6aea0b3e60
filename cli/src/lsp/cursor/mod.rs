//! Where a cursor is in a document that may not parse: the path of keys and list items down
//! to it, whether it is on a key or a value, and the token under it. An editor asks for
//! completion while the author is halfway through a word (`"sche|`), so this reads the text
//! tolerantly: JSON by scanning up to the cursor (brackets, strings, `:` and `,`), YAML by
//! its indentation (the lines above with less indentation are the parents), and a YAML flow
//! collection by the JSON scanner taught plain scalars.

mod flow;
mod yaml;

use std::ops::Range;

use manifest_core::Format;

/// One step down a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// An object member.
    Key(String),
    /// A list item, by index.
    Index(usize),
}

/// What the cursor stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A member's key: `path` names the object.
    Key,
    /// A value: `path` names it (the member or the list item).
    Value,
}

/// The cursor's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) path: Vec<Step>,
    pub(crate) slot: Slot,
    /// The bytes of the word under the cursor (with its quotes, if any), possibly empty: what
    /// a completion replaces.
    pub(crate) token: Range<usize>,
    /// The members already written in the object the cursor is in (a key, and its value when
    /// that is a plain string), before and after the cursor: which fields not to offer again,
    /// and which arm a union is.
    pub(crate) siblings: Vec<(String, Option<String>)>,
    /// The cursor follows a finished key or value (`"kind": "web"|`): nothing is to be
    /// completed there, as anything inserted would be a second token.
    pub(crate) finished: bool,
    /// A value completed here needs a space before it (YAML's `key:|`).
    pub(crate) space_before: bool,
}

impl Cursor {
    /// The token's text without its quotes.
    pub(crate) fn word<'t>(&self, text: &'t str) -> &'t str {
        let raw = text.get(self.token.clone()).unwrap_or("");
        let raw = raw.strip_prefix(['"', '\'']).unwrap_or(raw);
        raw.strip_suffix(['"', '\'']).unwrap_or(raw)
    }
}

/// The cursor at byte `offset` of `text`, or `None` outside any object (before the first
/// `{`, in a comment).
pub(crate) fn at(text: &str, offset: usize) -> Option<Cursor> {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    match Format::detect(text) {
        Format::Json => flow::at(text, offset),
        Format::Yaml => yaml::at(text, offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cursor where `|` is (the bar removed).
    fn cursor(marked: &str) -> (String, Cursor) {
        let offset = marked.find('|').expect("a |");
        let text = marked.replacen('|', "", 1);
        let cursor = at(&text, offset).expect("in an object");
        (text, cursor)
    }

    fn keys(path: &[Step]) -> Vec<String> {
        path.iter()
            .map(|s| match s {
                Step::Key(k) => k.clone(),
                Step::Index(i) => format!("[{i}]"),
            })
            .collect()
    }

    #[test]
    fn json_key_halfway_typed_in_a_nested_object() {
        let (text, c) = cursor("{\"schema\": \"x\", \"deployment\": {\"jobs\": 1, \"pla|\n}");
        assert_eq!(keys(&c.path), ["deployment"]);
        assert_eq!(c.slot, Slot::Key);
        assert_eq!(c.word(&text), "pla");
        assert_eq!(c.siblings, [("jobs".to_owned(), None)]);
    }

    #[test]
    fn json_value_in_a_list_of_objects_knows_its_index_and_key() {
        let (text, c) = cursor("{\"a\": [{\"k\": 1}, {\"kind\": \"se|cret\"}]}");
        assert_eq!(keys(&c.path), ["a", "[1]", "kind"]);
        assert_eq!(c.slot, Slot::Value);
        assert_eq!(c.word(&text), "secret", "the whole word, to the closing quote");
        assert_eq!(&text[c.token.clone()], "\"secret\"");
    }

    #[test]
    fn json_empty_key_slot_after_a_comma_and_closed_objects_are_left() {
        let (text, c) = cursor("{\"a\": {\"b\": {}}, |}");
        assert!(c.path.is_empty());
        assert_eq!(c.slot, Slot::Key);
        assert_eq!(c.word(&text), "");
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(at("{\"a\": 1} ", 9).is_none(), "after the root object");
        // YAML's empty document is the root object's key slot.
        assert!(at("  ", 1).is_some_and(|c| c.path.is_empty() && c.slot == Slot::Key));
    }

    #[test]
    fn yaml_nested_key_and_value_by_indentation() {
        let (text, c) = cursor("schema: x\ndeployment:\n  jobs: 1\n  pla|\nruntime:\n  kind: javascript\n");
        assert_eq!(keys(&c.path), ["deployment"]);
        assert_eq!((c.slot, c.word(&text)), (Slot::Key, "pla"));
        assert_eq!(c.siblings, [("jobs".to_owned(), Some("1".to_owned()))]);

        let (text, c) = cursor("runtime:\n  kind: java|\n  entrypoint: a.js\n");
        assert_eq!(keys(&c.path), ["runtime", "kind"]);
        assert_eq!((c.slot, c.word(&text)), (Slot::Value, "java"));
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["kind", "entrypoint"]);
    }

    #[test]
    fn yaml_list_items_count_their_markers() {
        let (text, c) = cursor("configuration:\n  variables:\n    - kind: plain\n      name: A\n    - kind: sec|ret\n");
        assert_eq!(keys(&c.path), ["configuration", "variables", "[1]", "kind"]);
        assert_eq!(c.word(&text), "secret");

        let (_, c) = cursor("configuration:\n  variables:\n    - kind: plain\n      na|\n");
        assert_eq!(keys(&c.path), ["configuration", "variables", "[0]"]);
        assert_eq!(c.slot, Slot::Key);
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["kind"]);
    }

    #[test]
    fn a_key_without_its_closing_quote_ending_in_a_multibyte_character_does_not_panic() {
        for marked in ["{\"schema\": \"x\",\n  \"größé|\n}", "{\"a\": 1, \"é|", "{\"a\": 1, \"é|\r\n}"] {
            let (text, c) = cursor(marked);
            assert_eq!(c.slot, Slot::Key, "{marked}");
            assert!(c.word(&text).ends_with('é'), "{marked}: {:?}", c.word(&text));
            assert!(!text[c.token.clone()].contains(['\n', '\r']), "one line: {marked}");
        }
    }

    #[test]
    fn json_strings_stop_at_the_line_end() {
        let (text, c) = cursor("{\"schemaVersion\": 5, \"schema\": \"svc.application-manifest,\n  |\n}");
        assert_eq!(c.slot, Slot::Key, "the broken string ended at its line");
        assert_eq!(c.word(&text), "");
        assert!(c.siblings.iter().any(|(k, _)| k == "schema"));
    }

    #[test]
    fn json_right_after_a_finished_string_or_word_is_finished() {
        for marked in ["{\"runtime\": {\"kind\": \"javascript\"|}}", "{\"schema\"|}", "{\"jobs\": 1 |}"] {
            assert!(cursor(marked).1.finished, "{marked}");
        }
        for marked in ["{\"kind\": |}", "{\"kind\": \"ja|\"}", "{|}", "{\"a\": 1, |}"] {
            assert!(!cursor(marked).1.finished, "{marked}");
        }
    }

    #[test]
    fn json_siblings_after_the_cursor_count_too() {
        let (_, c) = cursor("{|\n \"schema\": \"x\", \"runtime\": {\"kind\": \"native\"}, \"schemaVersion\": 5}");
        let keys: Vec<&str> = c.siblings.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(keys, ["schema", "runtime", "schemaVersion"], "nested members are not siblings");
        let (_, c) = cursor("{\"runtime\": {|\"kind\": \"native\", \"image\": {}}}");
        assert_eq!(c.siblings, [("kind".to_owned(), Some("native".to_owned())), ("image".to_owned(), None)]);
    }

    #[test]
    fn yaml_tokens_and_values_stop_before_a_comment() {
        let (text, c) = cursor("runtime:\n  kind: java|  # the runtime\n");
        assert_eq!(&text[c.token.clone()], "java");
        let (text, c) = cursor("runtime:\n  kind: native # n\n  ent|  # todo\n");
        assert_eq!(&text[c.token.clone()], "ent");
        assert_eq!(c.siblings[0], ("kind".to_owned(), Some("native".to_owned())));
    }

    #[test]
    fn yaml_value_right_after_the_colon_needs_a_space() {
        let (_, c) = cursor("runtime:\n  kind:|\n");
        assert_eq!((c.slot, c.space_before), (Slot::Value, true));
        let (_, c) = cursor("runtime:\n  kind: |\n");
        assert!(!c.space_before);
        let (text, c) = cursor("runtime:\n  kind:\tjav|\n");
        assert_eq!((c.slot, c.word(&text)), (Slot::Value, "jav"), "a tab after the colon");
    }

    #[test]
    fn yaml_lists_written_at_their_keys_indentation() {
        let (_, c) = cursor("configuration:\n  variables:\n  - kind: plain\n    na|\n");
        assert_eq!(keys(&c.path), ["configuration", "variables", "[0]"]);
        let (_, c) = cursor("variables:\n- |\n");
        assert_eq!(keys(&c.path), ["variables", "[0]"]);
        let (_, c) = cursor("a:\n- x: 1\nvariables:\n- x: 1\n- |\n");
        assert_eq!(keys(&c.path), ["variables", "[1]"], "counting stops at the list's key");
    }

    #[test]
    fn yaml_flow_mappings_and_sequences_have_paths_keys_and_values() {
        let (text, c) = cursor("runtime: {kind: java|, entrypoint: {file: a.js}}\n");
        assert_eq!(keys(&c.path), ["runtime", "kind"]);
        assert_eq!((c.slot, c.word(&text)), (Slot::Value, "java"));
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["kind", "entrypoint"]);

        let (text, c) = cursor("runtime: {kind: javascript, entrypoint: {fi|}}\n");
        assert_eq!(keys(&c.path), ["runtime", "entrypoint"]);
        assert_eq!((c.slot, c.word(&text)), (Slot::Key, "fi"));

        // A sequence in a flow mapping in a block list item, over two lines.
        let (text, c) = cursor("execution:\n  mode: once\nx:\n  - {a: 1,\n     b: [x, y, z|]}\n");
        assert_eq!(keys(&c.path), ["x", "[0]", "b", "[2]"]);
        assert_eq!((c.slot, c.word(&text)), (Slot::Value, "z"));

        // The union's arm is read from a plain scalar written after the cursor.
        let (_, c) = cursor("deployment: {schedule: {|, phasing: {mode: evenly_spaced}}}\n");
        assert_eq!(keys(&c.path), ["deployment", "schedule"]);
        let (_, c) = cursor("phasing: {jobsPerPhase: 2, |, mode: evenly_spaced}\n");
        assert_eq!(
            c.siblings,
            [("jobsPerPhase".to_owned(), Some("2".to_owned())), ("mode".to_owned(), Some("evenly_spaced".to_owned()))]
        );
    }

    #[test]
    fn yaml_a_flow_collection_over_several_lines_is_one_value_to_the_keys_below_it() {
        let (_, c) = cursor("deployment:\n  schedule: {duration: 1h,\n  phasing: {mode: simultaneous}}\n  jo|\n");
        assert_eq!(keys(&c.path), ["deployment"]);
        assert_eq!(
            c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
            ["schedule"],
            "not the flow's own lines"
        );
        let (_, c) = cursor("runtime: {kind: javascript,\nentrypoint: {file: a.js}}\nexecution:\n  mo|\n");
        assert_eq!(keys(&c.path), ["execution"]);
        let (_, c) = cursor("runtime: {kind: javascript,\nentrypoint: {fi|}}\n");
        assert_eq!(keys(&c.path), ["runtime", "entrypoint"], "inside, on its second line");
    }

    #[test]
    fn yaml_flow_values_right_after_the_colon_need_a_space_and_plain_scalars_keep_theirs() {
        let (_, c) = cursor("runtime: {kind:|}\n");
        assert_eq!((c.slot, c.space_before), (Slot::Value, true));
        let (text, c) = cursor("labels: {a: it's a|, 'b': 'x''y'}\n");
        assert_eq!(c.word(&text), "it's a");
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        // Past the collection's end, in a comment inside it, or in a block scalar: no place.
        assert!(at("a: {b: 1} ", 10).is_none());
        assert!(at("a: {b: 1, # c\n d: 2}", 12).is_none());
        let (_, c) = cursor("s: >\n  {a: 1\nk|\n");
        assert_eq!((keys(&c.path), c.slot), (Vec::<String>::new(), Slot::Key), "a block scalar's `{{` opens nothing");
    }

    #[test]
    fn yaml_comments_are_no_place() {
        assert!(at("# a comment |", 12).is_none());
    }
}
