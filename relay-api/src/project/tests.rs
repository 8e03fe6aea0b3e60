use serde_json::json;

use super::*;

fn minimal() -> serde_json::Value {
    json!({
        "version": 1,
        "name": "shop",
        "runtime": "node",
        "app": {"entrypoint": "server.js"},
        "spend": {"ceilingMicros": 5_000_000},
    })
}

fn project(value: &serde_json::Value) -> Project {
    read(&value.to_string()).expect("valid project")
}

#[test]
fn the_table_is_sound() {
    assert_eq!(manifest_core::document::table_problems(&PROJECT), Vec::<String>::new());
}

#[test]
fn each_format_check_agrees_with_its_schema_regex() {
    // Strings near each format's edges, and each with a character appended or removed.
    let seeds = [
        "",
        ".",
        "..",
        "...",
        "a",
        "A",
        "-",
        "a-",
        "-a",
        "ab",
        "a-b",
        "ab--c",
        "abc--d",
        "xn--a",
        "a.b",
        "a..b",
        "a.b.",
        "*.a.b",
        "a.localhost",
        "www.example.com",
        "1.2.3.4",
        "1.example.org",
        "example",
        "Example.com",
        "/",
        "/health",
        "/he alth",
        "health",
        "/a?b=c",
        "/é",
        "server.js",
        "./server.js",
        "../x",
        "a/../b",
        "a//b",
        "a/",
        "/srv",
        "a\\b",
        "src/app.js",
        "..a",
        "_X",
        "X1",
        "1X",
        "my_var",
        "MY-VAR",
    ];
    let long = ["a".repeat(40), "a".repeat(41), "a".repeat(63) + ".com", "a".repeat(64) + ".com", "A".repeat(128)];
    let mut samples: Vec<String> = seeds.iter().map(|s| s.to_string()).chain(long).collect();
    for s in samples.clone() {
        for extra in ["a", "-", ".", "/", "0", "\n"] {
            samples.push(format!("{s}{extra}"));
            samples.push(format!("{extra}{s}"));
        }
        if !s.is_empty() {
            samples.push(s[1..].to_owned());
        }
    }
    for (name, pattern) in formats::ALL {
        // The regex as the schema writes it (with the portable end anchor).
        let regex = pattern.regex.strip_suffix('$').map_or(pattern.regex.to_owned(), |r| format!("{r}(?![\\s\\S])"));
        let validator =
            jsonschema::draft202012::new(&json!({"type": "string", "pattern": regex})).expect("regex compiles");
        for s in &samples {
            let by_check = (pattern.check)(s);
            let by_regex = validator.is_valid(&json!(s));
            if pattern.exact {
                assert_eq!(by_check, by_regex, "{name} on {s:?}");
            } else {
                // An inexact regex may accept more, never less.
                assert!(!by_check || by_regex, "{name} refuses {s:?} by regex only");
            }
        }
    }
}

#[test]
fn the_closed_sets_are_the_model_enums() {
    for value in RUNTIMES {
        let runtime: Runtime = serde_json::from_value(json!(value)).expect("runtime");
        assert_eq!(serde_json::to_value(runtime).expect("json"), json!(value));
    }
    for value in KINDS {
        let kind: Kind = serde_json::from_value(json!(value)).expect("kind");
        assert_eq!(serde_json::to_value(kind).expect("json"), json!(value));
    }
    for value in TLS_MODES {
        let tls: Tls = serde_json::from_value(json!(value)).expect("tls");
        assert_eq!(serde_json::to_value(tls).expect("json"), json!(value));
    }
}

#[test]
fn defaults_are_filled() {
    let p = project(&minimal());
    assert_eq!(p.kind, Kind::WebService);
    assert_eq!(p.tls, Tls::Job);
    assert_eq!((p.app.dir.as_str(), p.app.port, p.app.health_path.as_str()), (".", 8080, "/health"));
    assert!(p.app.env.is_empty() && p.app.secrets.is_empty() && p.hostnames.is_empty());
    assert!(!p.proxy_protocol);
    assert_eq!(p.spend.fund_periods, 1);
    assert_eq!((p.gateway, p.dns, p.manifest), (None, None, None));
}

#[test]
fn the_digest_is_of_the_meaning_not_the_spelling() {
    let base = project(&minimal());
    let mut explicit = minimal();
    explicit["$schema"] = json!("./ingress.schema.json");
    explicit["kind"] = json!("web-service");
    explicit["tls"] = json!("job");
    explicit["app"]["port"] = json!(8080);
    explicit["spend"]["fundPeriods"] = json!(1);
    assert_eq!(project(&explicit).digest(), base.digest());
    // Reordered keys, spaces and newlines.
    let reordered = "{\"spend\": {\"ceilingMicros\": 5000000},\n \"app\": {\"entrypoint\": \"server.js\"}, \"runtime\": \"node\", \"name\": \"shop\", \"version\": 1}";
    assert_eq!(read(reordered).expect("valid").digest(), base.digest());
    let mut other = minimal();
    other["spend"]["ceilingMicros"] = json!(5_000_001);
    assert_ne!(project(&other).digest(), base.digest());
    assert!(base.digest().starts_with("sha256:") && base.digest().len() == 71);
    // What a deploy ships covers the app's files, whatever their order.
    let files = [("server.js", &b"v1"[..]), ("lib/a.js", &b"a"[..])];
    let shipped = base.digest_with_files(files);
    assert_eq!(base.digest_with_files(files.into_iter().rev()), shipped, "file order is not meaning");
    assert_ne!(base.digest_with_files([("server.js", &b"v2"[..]), ("lib/a.js", &b"a"[..])]), shipped, "an edit");
    assert_ne!(base.digest_with_files([("server.js", &b"v1"[..])]), shipped, "a file removed");
    assert_ne!(base.digest_with_files([("server.js", &b"v1"[..]), ("lib/b.js", &b"a"[..])]), shipped, "a rename");
    assert_ne!(project(&other).digest_with_files(files), shipped, "the project file");
    // What is sent reads back as the same project.
    let sent = serde_json::to_string(&base).expect("json");
    assert_eq!(read(&sent).expect("the sent form is valid"), base);
    assert!(!sent.contains("$schema"));
}

/// The files a deploy ships are digested as the publication service digests an artifact
/// bundle (`svc_execution::artifacts::bundle_digest`, whose test digests the same files to
/// the same value): `{<path>: "sha256:<hex of its bytes>"}` in RFC 8785 JSON.
#[test]
fn a_deploys_files_member_is_the_artifact_bundle_encoding() {
    let base = project(&minimal());
    let files = json!({
        "lib/a.js": "sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
        "server.js": "sha256:3bfc269594ef649228e9a74bab00f042efc91d5acc6fbee31a382e80d42388fe",
    });
    let shipped = base.digest_with_files([("server.js", &b"v1"[..]), ("lib/a.js", &b"a"[..])]);
    assert_eq!(Some(shipped), manifest_core::canonical_digest(&json!({"project": base, "files": files})));
    assert_eq!(
        manifest_core::canonical_digest(&json!({"files": files})).as_deref(),
        Some("sha256:8547d87a78e5884ff17a2dad84d2ed72359e9d9d67db2821414c357abce97af1"),
        "the bundle digest of the same files"
    );
}

#[test]
fn unsupported_features_are_read_and_named() {
    let mut all = minimal();
    all["runtime"] = json!("python");
    all["kind"] = json!("static-site");
    all["tls"] = json!("gateway");
    all["gateway"] = json!("gw-eu-1");
    all["dns"] = json!({"delegateZone": "edge.example.com"});
    let p = project(&all);
    let named: Vec<(&str, &str)> = p.unsupported().iter().map(|u| (u.as_str(), u.pointer())).collect();
    assert_eq!(
        named,
        [
            ("arbitrary runtimes", "/runtime"),
            ("arbitrary hosting", "/kind"),
            ("gateway-terminated TLS", "/tls"),
            ("self-serve gateway selection", "/gateway"),
            ("delegated gateway DNS zones", "/dns"),
        ]
    );
    assert!(Unsupported::ArbitraryRuntimes.to_string().contains("set `runtime` to \"node\""));
    let d = Unsupported::GatewayTerminatedTls.diagnostic();
    assert_eq!((d.code.as_str(), d.pointer.as_str(), d.layer.number()), ("unsupported_feature", "/tls", 5));
    assert!(d.message.starts_with("not supported by the ingress add-on: gateway-terminated TLS; "), "{}", d.message);
    match p.manifest_v5(None) {
        Err(ManifestV5Error::Unsupported(list)) => assert_eq!(list.len(), 5),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(project(&minimal()).unsupported().is_empty());
}

#[test]
fn misspelt_fields_get_a_suggestion_with_a_position() {
    let text = "{\n  \"version\": 1,\n  \"name\": \"shop\",\n  \"runtime\": \"nodejs\",\n  \"app\": {\"entrypoint\": \"server.js\", \"helthPath\": \"/h\"},\n  \"spend\": {\"ceilingMicros\": 1}\n}";
    let errors = read(text).expect_err("invalid");
    let got: Vec<(&str, &str, Option<u32>, Option<u32>)> =
        errors.diagnostics.iter().map(|d| (d.pointer.as_str(), d.code.as_str(), d.line, d.column)).collect();
    assert_eq!(
        got,
        [("/runtime", "invalid_value", Some(4), Some(14)), ("/app/helthPath", "unknown_field", Some(5), Some(38))]
    );
    assert!(errors.diagnostics[0].message.contains("did you mean \"node\"?"), "{}", errors.diagnostics[0].message);
    assert!(errors.diagnostics[1].message.contains("did you mean \"healthPath\"?"));
    let shown = errors.to_string();
    assert!(shown.starts_with("the project file is invalid (2 errors):\n  4:14 /runtime: "), "{shown}");
}

#[test]
fn a_project_with_thousands_of_problems_lists_a_thousand_and_counts_the_rest() {
    let mut value = minimal();
    for i in 0..5000 {
        value[format!("unknown{i}")] = json!(i);
    }
    let errors = read(&value.to_string()).expect_err("invalid");
    assert_eq!(errors.diagnostics.len(), manifest_core::MAX_DIAGNOSTICS + 1);
    assert!(errors.diagnostics[..1000].iter().all(|d| d.code == Code::UnknownField));
    let last = &errors.diagnostics[1000];
    assert_eq!((last.code, last.pointer.as_str()), (Code::DiagnosticsTruncated, ""));
    assert!(last.message.starts_with("4000 more problems not shown"), "{}", last.message);
    let shown = errors.to_string();
    assert!(shown.starts_with("the project file is invalid (1000 errors shown, more not):"), "{}", &shown[..80]);
    assert!(shown.len() < 1_000_000, "{} bytes", shown.len());
}

#[test]
fn environment_names_are_claimed_once_and_not_reserved() {
    let mut value = minimal();
    value["app"]["env"] = json!({"PORT": "1", "SVC_TOKEN": "x", "LOG": "info", "lower": "x"});
    value["app"]["secrets"] = json!({"LOG": {"fromEnv": "LOG"}, "SVC_KEY": {"fromEnv": "K"}});
    let errors = read(&value.to_string()).expect_err("invalid");
    let got: Vec<(&str, &str)> = errors.diagnostics.iter().map(|d| (d.pointer.as_str(), d.code.as_str())).collect();
    assert_eq!(
        got,
        [
            ("/app/env/PORT", "reserved_environment_name"),
            ("/app/env/SVC_TOKEN", "reserved_environment_name"),
            ("/app/env/lower", "invalid_format"),
            ("/app/secrets/LOG", "duplicate_environment_name"),
            ("/app/secrets/SVC_KEY", "reserved_environment_name"),
        ]
    );
    assert!(errors.diagnostics[0].message.contains("set `app.port` instead"));
    assert!(errors.diagnostics[3].message.contains("already claimed at /app/env/LOG"));
}

#[test]
fn the_derived_manifest_is_a_valid_node_web_job_at_every_bound() {
    let mut value = minimal();
    value["name"] = json!("a".repeat(40));
    value["app"]["entrypoint"] = json!("./dist/server.js");
    value["app"]["port"] = json!(65535);
    let env: serde_json::Map<String, serde_json::Value> =
        (0..MAX_ENV).map(|i| (format!("VAR_{i}"), json!(format!("value {i}")))).collect();
    let secrets: serde_json::Map<String, serde_json::Value> =
        (0..MAX_SECRETS).map(|i| (format!("S{i:0>126}"), json!({"fromEnv": "LOCAL"}))).collect();
    value["app"]["env"] = json!(env);
    value["app"]["secrets"] = json!(secrets);
    value["spend"]["ceilingMicros"] = json!(manifest_core::shape::MAX_SAFE_INTEGER);
    let p = project(&value);
    let manifest = p.manifest_v5(None).expect("derived");
    let text = manifest.to_string();
    let report = manifest_core::validate(text.as_bytes());
    assert!(report.is_valid(), "{:?}", report.diagnostics);
    assert_eq!(report.schema_version, Some(5));
    assert_eq!(
        manifest["runtime"],
        json!({"kind": "javascript", "engine": "nodejs", "entrypoint": {"file": "./dist/server.js"}})
    );
    assert_eq!(manifest["execution"]["mode"], "continuous");
    assert_eq!(
        manifest["configuration"]["variables"][0],
        json!({"source": "literal", "name": "PORT", "value": "65535"})
    );
    assert_eq!(manifest["configuration"]["variables"].as_array().map(Vec::len), Some(64));
    assert_eq!(manifest["configuration"]["secrets"].as_array().map(Vec::len), Some(64));
    assert_eq!(manifest["deployment"]["spend"]["perJob"], json!(manifest_core::shape::MAX_SAFE_INTEGER.to_string()));
    assert!(manifest.get("ingress").is_none(), "V5 has no ingress; the relay carries it");
}

const NAMED_V5: &str = "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: shop\nrelease:\n  mode: source\nruntime:\n  kind: javascript\n  entrypoint:\n    file: server.js\nexecution:\n  mode: continuous\ndeployment:\n  schedule:\n    duration: 1h\n  spend:\n    unit: service_credit_micros\n    perJob: \"100\"\n    rate:\n      amount: \"1000\"\nstate:\n  mode: off\n";

#[test]
fn a_named_manifest_must_be_a_valid_long_running_node_job() {
    let mut value = minimal();
    value["manifest"] = json!("deploy/manifest.yaml");
    let p = project(&value);
    let manifest = p.manifest_v5(Some(NAMED_V5)).expect("valid named manifest");
    assert_eq!(manifest["runtime"]["kind"], "javascript");
    assert!(manifest["runtime"].get("engine").is_none(), "returned as authored, defaults left out");
    assert_eq!(
        manifest_core::canonical_digest(&manifest),
        manifest_core::validate(NAMED_V5.as_bytes()).authored_digest()
    );

    assert!(matches!(p.manifest_v5(None), Err(ManifestV5Error::NotLoaded { path }) if path == "deploy/manifest.yaml"));
    assert!(matches!(project(&minimal()).manifest_v5(Some(NAMED_V5)), Err(ManifestV5Error::NotNamed)));
    let once = NAMED_V5.replace("mode: continuous", "mode: once").replace("    rate:\n      amount: \"1000\"\n", "");
    match p.manifest_v5(Some(&once)) {
        Err(ManifestV5Error::NotNodeWebJob { pointer, found, .. }) => {
            assert_eq!((pointer, found.as_str()), ("/execution/mode", "\"once\""))
        }
        other => panic!("expected NotNodeWebJob, got {other:?}"),
    }
    let v4 = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/node-demo/manifest.v4.json"))
        .expect("the demo's V4 manifest");
    assert!(matches!(p.manifest_v5(Some(&v4)), Err(ManifestV5Error::NotNodeWebJob { pointer: "/schemaVersion", .. })));
    let invalid = NAMED_V5.replace("applicationId: shop", "applicationId: Shop");
    match p.manifest_v5(Some(&invalid)) {
        Err(e @ ManifestV5Error::Invalid { .. }) => {
            let ManifestV5Error::Invalid { diagnostics, .. } = &e else { unreachable!() };
            assert_eq!(diagnostics[0].pointer, "/applicationId");
            assert!(e.to_string().contains("svc manifest validate --file deploy/manifest.yaml"));
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn the_schema_is_fixed_closed_and_digested() {
    let parsed: serde_json::Value = serde_json::from_str(schema()).expect("json");
    assert_eq!(parsed["$id"], SCHEMA_ID);
    assert_eq!(parsed["$schema"], manifest_core::DIALECT);
    assert_eq!(parsed["additionalProperties"], false);
    assert_eq!(parsed["properties"]["app"]["additionalProperties"], false);
    assert_eq!(parsed["properties"]["app"]["properties"]["env"]["maxProperties"], MAX_ENV);
    assert_eq!(parsed["properties"]["runtime"]["enum"], json!(RUNTIMES));
    assert_eq!(parsed["required"], json!(["version", "name", "runtime", "app", "spend"]));
    assert_eq!(schema_digest(), manifest_core::sha256(schema().as_bytes()));
    assert!(std::ptr::eq(schema(), schema()), "rendered once");
}
