//! Signed service catalogs end to end: `svc relay serve` signs, `svc ingress catalog
//! verify|show` checks against a pins file of its own (`SVC_RELAY_PINS`). The customer reaches
//! the relay through a small TCP front at a fixed address (the relay keeps its URL across
//! restarts, as a real one does); the front can also answer with a saved catalog, as a
//! man in the middle replaying an older one would.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use svc_e2e::service::{TempDir, svc_binary};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::deploy::{Relay, admin_refused};

/// What the front does with a connection.
#[derive(Debug, Clone)]
enum Mode {
    /// Relays the bytes to the coordinator's API.
    Forward(SocketAddr),
    /// Answers any request with this body (a saved signed catalog).
    Serve(Vec<u8>),
}

/// A TCP front on a fixed loopback address.
struct Front {
    addr: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    task: tokio::task::JoinHandle<()>,
}

impl Front {
    async fn start(mode: Mode) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the front");
        let addr = listener.local_addr().expect("address");
        let mode = Arc::new(Mutex::new(mode));
        let shared = mode.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let mode = shared.lock().expect("mode").clone();
                tokio::spawn(serve(conn, mode));
            }
        });
        Front { addr, mode, task }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().expect("mode") = mode;
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut conn: TcpStream, mode: Mode) {
    match mode {
        Mode::Forward(to) => {
            if let Ok(mut upstream) = TcpStream::connect(to).await {
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
            }
        }
        Mode::Serve(body) => {
            // Read the request head (bounded), then answer and close.
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
            let _ = conn.write_all(&body).await;
            let _ = conn.shutdown().await;
        }
    }
}

fn api_addr(relay: &Relay) -> SocketAddr {
    relay.api.trim_start_matches("http://").parse().expect("the relay API address")
}

/// `svc ingress catalog ARGS --relay URL` with a token and a pins file; (exit code, stdout, stderr).
async fn catalog(url: &str, token: &str, pins: &Path, args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(svc_binary())
        .args(["ingress", "catalog"])
        .args(args)
        .args(["--relay", url])
        .env("SVC_RELAY_TOKEN", token)
        .env("SVC_RELAY_PINS", pins)
        .output()
        .await
        .expect("svc ingress catalog");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The same with `--format json`, parsed, expecting exit `code`.
async fn catalog_json(url: &str, token: &str, pins: &Path, args: &[&str], code: i32) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let (got, out, err) = catalog(url, token, pins, &all).await;
    assert_eq!(got, code, "svc ingress catalog {args:?}: {err}\n{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("svc ingress catalog {args:?} printed no JSON ({e}): {out}"))
}

fn pin_of(pins: &Path, url: &str) -> Value {
    let file: Value = serde_json::from_slice(&std::fs::read(pins).expect("the pins file")).expect("JSON");
    file["relays"][url].clone()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn save(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn catalogs_are_pinned_checked_for_rollback_tampering_and_expiry_and_follow_a_rotation() {
    let dir = TempDir::new("relay-catalog");
    let data = dir.path().join("relay");
    let pins = dir.path().join("pins.json");
    let relay = Relay::start(&data, &args(&["--public", "127.0.0.1:0", "--price-micros", "250000"])).await;
    let front = Front::start(Mode::Forward(api_addr(&relay))).await;
    let url = front.url();
    let key1 = admin_key(&data);

    // First use: the key is pinned, and the customer is told to check it out of band.
    let (code, out, err) = catalog(&url, &relay.token, &pins, &["verify"]).await;
    assert_eq!(code, 0, "{err}\n{out}\n{}", relay.proc.output());
    assert!(err.contains(&format!("pinned key {key1} for {url} on first use; verify it out of band")), "{err}");
    assert!(out.starts_with(&format!("verified: catalog sequence 1 of relay localhost at {url}")), "{out}");
    assert_eq!(pin_of(&pins, &url)["key"], key1.as_str());
    assert_eq!(pin_of(&pins, &url)["source"], "first-use");
    assert_eq!(pin_of(&pins, &url)["last"]["sequence"], 1);

    // `show`: what the catalog says; saved for a replay later.
    let shown = catalog_json(&url, &relay.token, &pins, &["show"], 0).await;
    assert_eq!((shown["firstUse"].clone(), shown["keySource"].clone()), (false.into(), "first-use".into()));
    assert_eq!(shown["catalog"]["prices"]["priceMicros"], 250_000);
    let current = relay_api::validation::procedure::current();
    assert_eq!(shown["catalog"]["validators"][0]["digest"], current.digest.as_str());
    assert_eq!(shown["catalog"]["certificateAuthorities"][0]["name"], "svc development CA");
    assert_eq!(shown["catalog"]["gateways"], Value::Array(Vec::new()));
    let v1 = save(dir.path(), "v1.json", &shown["signedCatalog"]);
    let text = catalog(&url, &relay.token, &pins, &["show"]).await.1;
    assert!(text.contains("prices: USD 0.25 per hour (250000 service-credit-micros)"), "{text}");

    // A restart with a changed price: a higher sequence, same key, verified.
    drop(relay);
    let relay = Relay::start(&data, &args(&["--public", "127.0.0.1:0", "--price-micros", "300000"])).await;
    front.set(Mode::Forward(api_addr(&relay)));
    let shown = catalog_json(&url, &relay.token, &pins, &["show"], 0).await;
    assert_eq!((shown["sequence"].clone(), shown["key"].clone()), (2.into(), key1.as_str().into()));
    assert_eq!(shown["catalog"]["prices"]["priceMicros"], 300_000);
    let v2 = shown["signedCatalog"].clone();

    // The older catalog served again (a replay): refused, naming both sequences; pin unchanged.
    front.set(Mode::Serve(std::fs::read(&v1).expect("v1")));
    let refused = catalog_json(&url, &relay.token, &pins, &["verify"], 1).await;
    assert_eq!(refused["error"]["code"], "catalog_rollback", "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("sequence 1 is lower than sequence 2"), "{message}");
    let (code, _, err) = catalog(&url, "unused", &pins, &["verify", "--file", &v1.to_string_lossy()]).await;
    assert_eq!(code, 1);
    assert!(err.contains("refused: catalog_rollback") && err.contains("the pin was not changed"), "{err}");
    assert_eq!(pin_of(&pins, &url)["last"]["sequence"], 2);

    // One changed price in the signed object: the signature no longer verifies.
    let mut tampered = v2.clone();
    tampered["catalog"]["prices"]["priceMicros"] = 1.into();
    front.set(Mode::Serve(serde_json::to_vec(&tampered).expect("json")));
    let refused = catalog_json(&url, &relay.token, &pins, &["verify"], 1).await;
    assert_eq!(refused["error"]["code"], "catalog_signature_invalid", "{refused:#}");
    let file = save(dir.path(), "tampered.json", &tampered);
    let refused = catalog_json(&url, "unused", &pins, &["verify", "--file", &file.to_string_lossy()], 1).await;
    assert_eq!(refused["error"]["code"], "catalog_signature_invalid", "{refused:#}");

    // The coordinator's own last catalog changed on disk is not served: it signs a new one.
    front.set(Mode::Forward(api_addr(&relay)));
    let on_disk = data.join("catalog/signed.json");
    let stored = std::fs::read_to_string(&on_disk).expect("signed.json");
    std::fs::write(&on_disk, stored.replacen("300000", "1", 1)).expect("tamper on disk");
    let shown = catalog_json(&url, &relay.token, &pins, &["show"], 0).await;
    assert_eq!(
        (shown["sequence"].clone(), shown["catalog"]["prices"]["priceMicros"].clone()),
        (3.into(), 300_000.into())
    );

    // A key given with --pin that is not the relay's: refused, nothing pinned.
    let stranger_pins = dir.path().join("stranger-pins.json");
    let stranger = "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let refused = catalog_json(&url, &relay.token, &stranger_pins, &["verify", "--pin", stranger], 1).await;
    assert_eq!(refused["error"]["code"], "catalog_key_unknown", "{refused:#}");
    assert!(!stranger_pins.exists(), "a refused catalog pins nothing");

    // Rotation while the coordinator runs: the next catalog is signed by the new key and carries
    // the old key's statement; the pin follows it.
    let out = Command::new(svc_binary())
        .args(["relay", "admin", "rotate-catalog-key", "--format", "json", "--data-dir"])
        .arg(&data)
        .output()
        .expect("rotate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rotation: Value = serde_json::from_slice(&out.stdout).expect("the rotation as JSON");
    let key2 = admin_key(&data);
    assert_eq!((rotation["from"].as_str(), rotation["to"].as_str()), (Some(key1.as_str()), Some(key2.as_str())));
    assert_ne!(key1, key2);
    let (code, out, err) = catalog(&url, &relay.token, &pins, &["verify"]).await;
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(err.contains(&format!("rotated its catalog key from {key1} to {key2}")), "{err}");
    assert!(out.contains(&format!("signed by  {key2} (followed a rotation")), "{out}");
    assert_eq!(pin_of(&pins, &url)["key"], key2.as_str());
    assert_eq!(pin_of(&pins, &url)["source"], "rotation");
    // A customer who was given the old key by hand follows too.
    let given = dir.path().join("given-pins.json");
    let followed = catalog_json(&url, &relay.token, &given, &["verify", "--pin", &key1], 0).await;
    assert_eq!(
        (followed["rotatedFrom"].as_str(), followed["key"].as_str()),
        (Some(key1.as_str()), Some(key2.as_str()))
    );

    // A short validity: a saved catalog expires; the relay re-signs a fresh one.
    drop(relay);
    let relay = Relay::start(
        &data,
        &args(&["--public", "127.0.0.1:0", "--price-micros", "300000", "--catalog-validity-secs", "2"]),
    )
    .await;
    front.set(Mode::Forward(api_addr(&relay)));
    let shown = catalog_json(&url, &relay.token, &pins, &["show"], 0).await;
    let short = shown["sequence"].as_u64().expect("sequence");
    // RFC 3339 in `--format json` (the signed catalog keeps Unix ms).
    let time = |v: &Value| v.as_str().and_then(|s| humantime::parse_rfc3339(s).ok()).expect("an RFC 3339 time");
    let expires = time(&shown["expiresAt"]).duration_since(time(&shown["issuedAt"])).expect("after");
    assert_eq!(expires, Duration::from_secs(2), "the configured validity: {shown:#}");
    let saved = save(dir.path(), "short.json", &shown["signedCatalog"]);
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let refused = catalog_json(&url, "unused", &pins, &["verify", "--file", &saved.to_string_lossy()], 1).await;
    assert_eq!(refused["error"]["code"], "catalog_expired", "{refused:#}");
    assert!(refused["error"]["message"].as_str().unwrap_or("").contains("expired"), "{refused:#}");
    let fresh = catalog_json(&url, &relay.token, &pins, &["verify"], 0).await;
    assert!(fresh["sequence"].as_u64() > Some(short), "re-signed: {fresh:#}");

    // An admitted gateway operator appears in the next catalog, with the key it registered.
    let admission = {
        let out = std::process::Command::new(svc_e2e::service::svc_binary())
            .args(["relay", "admin", "admission-token", "--data-dir"])
            .arg(&data)
            .args(["--operator", "gw-one"])
            .output()
            .expect("svc relay admin admission-token");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let key = gateway_prep::key::OperatorKey::generate().expect("an operator key");
    let host = "gw1.example.test";
    let message = relay_api::coordinator::admission::registration_message(&admission, host, &key.public_key());
    let request = serde_json::json!({"admissionToken": admission, "publicKey": key.public_key(),
        "signature": key.sign(&message), "hostname": host});
    let (status, body) = super::client::post_json(api_addr(&relay), "/api/operators/register", &request);
    assert_eq!(status, 201, "{body}");
    let shown = catalog_json(&url, &relay.token, &pins, &["show"], 0).await;
    assert_eq!(
        shown["catalog"]["gateways"],
        serde_json::json!([{"operator": "gw-one", "hostname": host, "publicKey": key.public_key()}]),
        "{shown:#}"
    );
    let (status, body) = super::client::post_json(api_addr(&relay), "/api/operators/register", &request);
    assert_eq!(status, 409, "a reused admission token: {body}");
    assert!(body.contains("admission_token_used"), "{body}");
}

/// `svc relay admin catalog-key --data-dir DIR`.
fn admin_key(data: &Path) -> String {
    let out = Command::new(svc_binary())
        .args(["relay", "admin", "catalog-key", "--data-dir"])
        .arg(data)
        .output()
        .expect("svc relay admin catalog-key");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The route is behind the bearer token and the invitation, like every relay route.
#[tokio::test(flavor = "multi_thread")]
async fn the_catalog_route_needs_an_invited_token() {
    let dir = TempDir::new("relay-catalog-auth");
    let data = dir.path().join("relay");
    let relay = Relay::start(&data, &args(&["--public", "127.0.0.1:0"])).await;
    let pins = dir.path().join("pins.json");
    // An organization not invited gets no token (issue 42; a token from before that is
    // answered 403 ingress_invitation_required: relay-api's tests/names.rs).
    let refused = admin_refused(&data, "token", "outsider");
    assert!(refused.contains("not invited"), "{refused}");
    let (code, _, err) = catalog(&relay.api, "rly_wrong", &pins, &["verify"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unauthenticated (HTTP 401)"), "{err}");
    assert!(!pins.exists(), "nothing pinned");
}

/// The fenced block after `<!-- example: NAME -->` in docs/ingress-economics.md (or the
/// inline code on the next line).
fn example(doc: &str, name: &str) -> String {
    let marker = format!("<!-- example: {name} -->\n");
    let rest = doc.split_once(&marker).unwrap_or_else(|| panic!("the docs have no {marker:?}")).1;
    if !rest.starts_with("```") {
        return rest.trim_start_matches('`').split('`').next().unwrap_or("").to_owned();
    }
    let body = rest.split_once('\n').map(|(_, b)| b).unwrap_or("");
    body.split_once("\n```").map(|(b, _)| b.to_owned()).unwrap_or_default()
}

/// The worked example in the docs is a real catalog: its canonical bytes, digest, signature
/// and rotation statement all check out.
#[test]
fn the_worked_example_in_the_docs_verifies() {
    use relay_api::catalog::{Rotation, SignedCatalog, Verifier, canonical_bytes};
    let doc = std::fs::read_to_string(svc_e2e::workspace().join("docs/ingress-economics.md")).expect("the docs");
    let signed = SignedCatalog::from_json(example(&doc, "signed catalog").as_bytes()).expect("a signed catalog");
    let bytes = canonical_bytes(&Value::Object(signed.catalog.clone())).expect("canonical");
    assert_eq!(String::from_utf8_lossy(&bytes), example(&doc, "canonical bytes"));
    let opened = signed.open().expect("the signature verifies");
    assert_eq!(opened.digest, example(&doc, "digest"));
    let verified = Verifier::first_use().verify(&signed, opened.catalog.issued_at).expect("valid when issued");
    assert_eq!(verified.catalog.prices.price_micros, 250_000);
    let rotation: Rotation = serde_json::from_str(&example(&doc, "rotation")).expect("a rotation");
    assert!(rotation.is_signed(), "the rotation statement verifies");
    assert_eq!(rotation.from, opened.catalog.signing_key, "it rotates the example's key");
    let statement = serde_json::json!({
        "schema": "svc.relay-catalog-rotation", "from": rotation.from, "to": rotation.to, "sequence": rotation.sequence,
    });
    assert_eq!(
        String::from_utf8_lossy(&canonical_bytes(&statement).expect("canonical")),
        example(&doc, "rotation statement")
    );
}
