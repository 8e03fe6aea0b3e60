//! Numbers in the relay API's request bodies (issue 14, point 6): a count or an amount outside
//! its type is refused, never read as something else or dropped, and the refusal can name the
//! field. Tested against the public body types of `relay_api::coordinator::api`, read the way
//! the coordinator reads them: `serde_json` for the body, then, for a deployment, the project
//! file through `relay_api::project::read` (so its numbers get layer 1's bounds and a pointer).
//!
//! The coordinator's `body` helper reads bodies with plain `serde_json`, whose errors say what
//! is wrong ("invalid value: integer `-1`, expected u64 at line 1 column 14") but not where;
//! `serde_path_to_error` (already in the tree through axum's `Json`) adds the field's path,
//! which is what these tests check the types make possible.

use relay_api::coordinator::api::{DeployRequest, FundRequest, HostnameRequest, PinRequest, QuoteRequest};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Reads `body` as `T` the way a request body is read, with the path of the first problem.
fn read<T: DeserializeOwned>(body: &str) -> Result<T, (String, String)> {
    let mut de = serde_json::Deserializer::from_str(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| (e.path().to_string(), e.inner().to_string()))
}

/// A body whose `periods` is written as `value` (raw JSON, so 2^64 stays 2^64).
fn quote(value: &str) -> String {
    format!(r#"{{"periods": {value}}}"#)
}

#[test]
fn periods_of_two_to_the_64_is_refused_not_ignored() {
    for bad in [
        "18446744073709551616", // 2^64
        "340282366920938463463374607431768211456",
        "-1",
        "-18446744073709551616",
        "1.5",
        "1.0",
        "1e3",
        "\"5\"",
        "true",
        "[1]",
        "{}",
    ] {
        let (path, message) = read::<QuoteRequest>(&quote(bad)).expect_err(bad);
        assert_eq!(path, "periods", "{bad}: {message}");
        // Plain serde_json, which the coordinator uses today, refuses the same bodies.
        assert!(serde_json::from_str::<QuoteRequest>(&quote(bad)).is_err(), "{bad}");
    }
    // Everything in the type is read exactly; the handler then holds it to 1-10000 and
    // answers 400 "periods must be 1 to 10000".
    for (good, periods) in [("1", Some(1)), ("10000", Some(10_000)), ("18446744073709551615", Some(u64::MAX))] {
        assert_eq!(read::<QuoteRequest>(&quote(good)).map(|q| q.periods), Ok(periods), "{good}");
    }
    assert_eq!(read::<QuoteRequest>(&quote("null")).map(|q| q.periods), Ok(None));
    assert_eq!(read::<QuoteRequest>("{}").map(|q| q.periods), Ok(None));
}

#[test]
fn a_number_where_a_string_belongs_is_refused_at_its_field() {
    for (body, field) in [
        (r#"{"quoteId": 18446744073709551616}"#, "quoteId"),
        (r#"{"quoteId": 7}"#, "quoteId"),
        (r#"{"hostname": 1e400}"#, "hostname"),
        (r#"{"digest": -1}"#, "digest"),
    ] {
        let refused = match field {
            "quoteId" => read::<FundRequest>(body).map(|_| ()),
            "hostname" => read::<HostnameRequest>(body).map(|_| ()),
            _ => read::<PinRequest>(body).map(|_| ()),
        };
        let (path, message) = refused.expect_err(body);
        assert!(message.contains("expected a string") || message.contains("number out of range"), "{message}");
        assert_eq!(path, field, "{body}: {message}");
    }
    let (path, _) = read::<DeployRequest>(r#"{"project": {}, "bundle": {"server.js": 5}}"#).expect_err("a number");
    assert_eq!(path, "bundle.server.js");
    let (path, _) = read::<DeployRequest>(r#"{"project": {}, "bundle": {}, "manifest": 5}"#).expect_err("a number");
    assert_eq!(path, "manifest");
}

/// The problems of a deploy body's project, read as the coordinator reads it.
fn project_problems(project: &Value) -> Vec<(String, String)> {
    let body = json!({"project": project, "bundle": {}}).to_string();
    let request: DeployRequest = read(&body).expect("a well-formed deploy body");
    let text = serde_json::to_string(&request.project).expect("json");
    match relay_api::project::read(&text) {
        Ok(_) => Vec::new(),
        Err(e) => e.diagnostics.iter().map(|d| (d.pointer.clone(), d.code.as_str().to_owned())).collect(),
    }
}

#[test]
fn project_amounts_and_counts_outside_their_range_are_refused_at_their_pointer() {
    let minimal = || {
        json!({
            "version": 1, "name": "shop", "runtime": "node",
            "app": {"entrypoint": "server.js"}, "spend": {"ceilingMicros": 5_000_000}
        })
    };
    assert_eq!(project_problems(&minimal()), []);
    // serde_json's `Value` keeps integers up to 2^64 - 1 exactly and reads larger ones as
    // floats; either way the project's reader sees a number outside the field's bounds.
    let huge: Value = serde_json::from_str("18446744073709551616").expect("a float");
    for (pointer, value, code) in [
        ("/spend/ceilingMicros", json!(u64::MAX), "out_of_range"),
        ("/spend/ceilingMicros", huge.clone(), "invalid_type"),
        ("/spend/ceilingMicros", json!(0), "out_of_range"),
        ("/spend/ceilingMicros", json!(-1), "out_of_range"),
        ("/spend/ceilingMicros", json!(1.5), "invalid_type"),
        ("/spend/ceilingMicros", json!("5000000"), "invalid_type"),
        ("/spend/fundPeriods", json!(13), "out_of_range"),
        ("/spend/fundPeriods", json!(0), "out_of_range"),
        ("/spend/fundPeriods", huge, "invalid_type"),
        ("/app/port", json!(65_536), "out_of_range"),
        ("/app/port", json!(0), "out_of_range"),
        ("/version", json!(2), "out_of_range"),
    ] {
        let mut project = minimal();
        let (section, field) = pointer[1..].split_once('/').unwrap_or((&pointer[1..], ""));
        if field.is_empty() {
            project[section] = value.clone();
        } else {
            project[section][field] = value.clone();
        }
        assert_eq!(project_problems(&project), [(pointer.to_owned(), code.to_owned())], "{pointer} = {value}");
    }
}
