//! What each field of an effective Policy V4 becomes in the effective V5 document of its
//! migration: the same value at a V5 place, a behaviour every V5 job has, or nothing.

use serde_json::{Value, json};

/// What V5 does for one V4 policy field.
pub(crate) enum Expect {
    /// The V5 policy holds this value here.
    Same(String, Value),
    /// V5 always behaves as this V4 value says (not authored in V5).
    Fixed(Value),
    /// V5 has no form for it; an empty value asks for nothing.
    NoForm,
    /// Not a field of the application (the document's kind).
    Skip,
}

/// The V4 manifest field a policy field comes from (where a note points): a build's artifact
/// comes from its release mode, the accepted build.
pub(crate) fn manifest_pointer(policy_pointer: &str, v4: &Value) -> String {
    match policy_pointer.strip_prefix("/artifact") {
        Some(_) if v4["release"]["mode"] == "build" => "/release/mode".to_owned(),
        Some(rest) => format!("/release/artifact{rest}"),
        None => policy_pointer.to_owned(),
    }
}

/// `pointer` split into its segments.
fn segments(pointer: &str) -> Vec<&str> {
    pointer.split('/').skip(1).collect()
}

/// What V5 does with the V4 policy field at `pointer` holding `value` (`policy` is the whole V4
/// policy, for fields read with their siblings).
pub(crate) fn expect(pointer: &str, value: &Value, policy: &Value) -> Expect {
    let s = segments(pointer);
    let same = |at: &str, v: Value| Expect::Same(at.to_owned(), v);
    match s.as_slice() {
        ["schema" | "schemaVersion"] => Expect::Skip,
        ["applicationId" | "applicationUid"] => same(pointer, value.clone()),
        ["artifact", "kind" | "cid" | "digest"] | ["artifact", "encryption", "mode"] => same(pointer, value.clone()),
        ["artifact", ..] => Expect::NoForm,
        ["runtime", "engine"] => same("/runtime/engine", if value.is_null() { json!("nodejs") } else { value.clone() }),
        // The file of `node FILE`, `bun FILE`, `deno run FILE`.
        ["runtime", "command"] => {
            let words: Vec<&str> = value.as_str().unwrap_or_default().split_whitespace().collect();
            match words.as_slice() {
                ["node" | "bun", file] | ["deno", "run", file] => same("/runtime/entrypoint/file", json!(file)),
                _ => Expect::NoForm,
            }
        }
        ["runtime", "resources", field @ ("memoryMiB" | "storageMiB")] => match value.as_u64() {
            Some(0) => Expect::Skip,
            Some(mib) => same(
                &format!("/deployment/placement/minimums/{}", if *field == "memoryMiB" { "memory" } else { "storage" }),
                json!(format!("{mib}MiB")),
            ),
            None => Expect::NoForm,
        },
        ["runtime", "bootstrap", "trustProfile"] | ["deployment", "placement", "requirements", "trustProfile"] => {
            Expect::Fixed(json!("svc.attested-runtime.v1"))
        }
        ["runtime", "bootstrap", _] | ["observability", "runtimeDiagnostics", "signed"] => Expect::Fixed(json!(true)),
        ["deployment", "parallelism"] => same("/deployment/jobs", value.clone()),
        ["deployment", "schedule", "durationMs"] => same("/deployment/schedule/duration", value.clone()),
        ["deployment", "schedule", "startDelayMs"] => Expect::Fixed(json!(0)),
        ["deployment", "placement", "processorSelection", "mode"] => {
            let v5 = if value == "static" { "exact" } else { value.as_str().unwrap_or_default() };
            same("/deployment/placement/processorSelection/mode", json!(v5))
        }
        ["deployment", "placement", "processorSelection", "processorIds", _] => same(pointer, value.clone()),
        [
            "deployment",
            "placement",
            "processorSelection",
            "allowUnknownManager" | "requireScheduleClear" | "requireConsumerAccess",
        ] => Expect::Fixed(json!(false)),
        ["deployment", "lifecycle", "renewal", "mode"] => Expect::Fixed(json!("before_scheduled_end")),
        ["deployment", "lifecycle", "renewal", "leadTime", "mode"] => same(pointer, value.clone()),
        ["deployment", "lifecycle", "renewal", "leadTime", "durationMs"] => {
            same("/deployment/lifecycle/renewal/leadTime/duration", value.clone())
        }
        ["deployment", "lifecycle", "renewal", "leadTime", "profile"] => Expect::Skip,
        ["deployment", "lifecycle", "update", "timing"] => {
            let v5 = if value == "next_scheduled_renewal" { json!("next_renewal") } else { value.clone() };
            same(pointer, v5)
        }
        ["deployment", "lifecycle", "update", "existingJobs", "mode"] => same(pointer, value.clone()),
        // V5's recovery (`docs/executions.md`): 5 launch retries, wait after a failure.
        ["deployment", "lifecycle", "recovery", "launch", "maxRetries"] => Expect::Fixed(json!(5)),
        ["deployment", "lifecycle", "recovery", "runtimeFailure", "mode"] => {
            Expect::Fixed(json!("wait_until_scheduled_end"))
        }
        ["deployment", "spend", "maxServiceCreditMicrosPerGeneration"] => {
            same("/deployment/spend/perJob", json!(value.as_u64().unwrap_or_default().to_string()))
        }
        ["ingress", _, "mode"] => Expect::Fixed(json!("disabled")),
        // The port and path of a disabled ingress ask for nothing.
        ["ingress", kind, _] if policy["ingress"][kind]["mode"] == "disabled" => Expect::Skip,
        ["observability", "logs", "enabled"] => same(pointer, value.clone()),
        ["configuration", "variables", i, ..] => {
            variable(&policy["configuration"]["variables"][i.parse::<usize>().unwrap_or(usize::MAX)])
        }
        ["configuration", "secrets", i, field, ..] if *field != "bundleId" => {
            secret(&policy["configuration"]["secrets"][i.parse::<usize>().unwrap_or(usize::MAX)])
        }
        _ => Expect::NoForm,
    }
}

/// A V4 variable as V5 sets it: a fixed value when it is optional, unmanaged and has a
/// default; otherwise a managed one.
fn variable(v4: &Value) -> Expect {
    let name = &v4["name"];
    let managed = v4["managed"].as_bool().unwrap_or(false);
    let required = v4["required"].as_bool().unwrap_or(false);
    let v5 = match v4.get("default") {
        Some(default) if !managed && !required && !default.is_null() => {
            json!({"source": "literal", "name": name, "value": default})
        }
        default => {
            let mut v = json!({"source": "managed", "name": name, "required": required});
            if let Some(default) = default.filter(|d| !d.is_null()) {
                v["default"] = default.clone();
            }
            v
        }
    };
    Expect::Same(format!("variable {}", name.as_str().unwrap_or_default()), v5)
}

/// A V4 secret as V5 delivers it.
fn secret(v4: &Value) -> Expect {
    let destination = match v4["destination"]["kind"].as_str() {
        Some("env") => json!({"kind": "environment", "name": v4["destination"]["name"]}),
        _ => json!({"kind": "file", "path": v4["destination"]["path"]}),
    };
    let v5 = json!({
        "secretId": v4["secretId"],
        "required": v4["required"].as_bool().unwrap_or(true),
        "destination": destination,
    });
    Expect::Same(format!("secret {}", v4["secretId"].as_str().unwrap_or_default()), v5)
}

/// The value the V5 policy holds at `at`: a pointer, or `variable NAME` / `secret ID` for the
/// entry of that name (lists may lose entries).
pub(crate) fn v5_value(v5: &Value, at: &str) -> Option<Value> {
    if let Some(name) = at.strip_prefix("variable ") {
        let found = v5["configuration"]["variables"].as_array()?.iter().find(|v| v["name"] == name)?;
        // The V5 model writes `required` and `default` out; compare what the V4 side states.
        let mut found = found.clone();
        if found["source"] == "managed" && found.get("default").is_some_and(Value::is_null) {
            found.as_object_mut()?.remove("default");
        }
        return Some(found);
    }
    if let Some(id) = at.strip_prefix("secret ") {
        return v5["configuration"]["secrets"].as_array()?.iter().find(|s| s["secretId"] == id).cloned();
    }
    let found = v5.pointer(at)?.clone();
    // Durations compare as milliseconds.
    match found.as_str().and_then(manifest_core::formats::duration_ms).and_then(|ms| u64::try_from(ms).ok()) {
        Some(ms) if at.ends_with("duration") => Some(json!(ms)),
        _ => Some(found),
    }
}

/// Whether a V4 value asks for nothing (an empty list or object, or null).
pub(crate) fn empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}
