//! The corpus covers every layer-1/2 row of SPEC.md's error and limits tables, and every
//! bound of a limit at, below and above its edge.

use std::collections::{BTreeMap, BTreeSet};

use svc_e2e::{cases, rows};

#[test]
fn every_layer_1_2_row_has_cases_and_every_bound_its_three_edges() {
    let cases = cases();
    let mut by_row: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut edges: BTreeSet<(String, String, String)> = BTreeSet::new();
    for case in &cases {
        let row_ids = case.rows();
        for id in &row_ids {
            by_row.entry(id.clone()).or_default().push(case.name());
        }
        if let (Some(first), Some(bound), Some(point)) =
            (row_ids.first(), case.expect["edge"]["bound"].as_str(), case.expect["edge"]["point"].as_str())
        {
            edges.insert((first.clone(), bound.to_owned(), point.to_owned()));
        }
    }
    let mut problems = Vec::new();
    let registry = rows();
    let known: BTreeSet<&str> = registry.iter().filter_map(|r| r["id"].as_str()).collect();
    for id in by_row.keys() {
        if !known.contains(id.as_str()) {
            problems.push(format!("a case names row {id}, which rows.json does not list"));
        }
    }
    for row in &registry {
        let id = row["id"].as_str().unwrap_or_default();
        if row.get("excluded").is_some() {
            continue;
        }
        if !by_row.contains_key(id) {
            problems.push(format!("row {id} has no case"));
        }
        for bound in row["bounds"].as_array().into_iter().flatten().filter_map(|b| b.as_str()) {
            for point in ["at", "below", "above"] {
                if !edges.contains(&(id.to_owned(), bound.to_owned(), point.to_owned())) {
                    problems.push(format!("row {id} bound {bound} has no case {point} the edge"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_corpus_is_broad() {
    let cases = cases();
    let count = |f: &dyn Fn(&svc_e2e::Case) -> bool| cases.iter().filter(|c| f(c)).count();
    assert!(cases.len() >= 150, "{} cases", cases.len());
    assert!(count(&|c| c.name().starts_with("v4/")) >= 50);
    assert!(count(&|c| c.name().starts_with("v5/")) >= 50);
    assert!(count(&|c| c.name().ends_with(".yaml")) >= 30);
    assert!(count(&|c| c.valid()) >= 20);
    assert!(count(&|c| !c.valid()) >= 100);
}
