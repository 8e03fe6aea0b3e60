//! The relay's signed catalog, as its customers' CLIs fetch it (`GET /api/ingress/catalog`),
//! and whether it verifies: its signature against the key it names, its rotation statement,
//! its validity. The trust in that key is the reader's to establish out of band: the page
//! gives the command that pins it (`svc ingress catalog verify --pin`).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use svc_web::page::state;
use svc_web::{Markup, html};

use super::views::at;
use super::{Console, answer, blocking, member};
use crate::catalog::{Catalog, CatalogError, SignedCatalog};
use crate::coordinator::operations::signed_catalog;
use crate::coordinator::store::now_ms;

/// What the page says of the catalog served now.
struct Checked {
    signed: SignedCatalog,
    /// The catalog and its digest, or why its signature or content does not hold.
    opened: Result<(Catalog, String), CatalogError>,
    /// Whether the rotation statement beside it (if any) is signed by the key it names as old.
    rotation_signed: Option<bool>,
    now: i64,
}

pub(super) async fn page(State(console): State<Console>, headers: HeaderMap) -> Response {
    answer(
        async {
            let member = member(&console.engine, &headers).await?;
            let checked = blocking(move || {
                let signed = signed_catalog(&console.engine)?;
                let opened = signed.open().map(|o| (o.catalog, o.digest));
                let rotation_signed = signed.rotation.as_ref().map(crate::catalog::Rotation::is_signed);
                Ok(Checked { signed, opened, rotation_signed, now: now_ms() })
            })
            .await?;
            let page = member.page("Catalog", member.nav(None, "catalog"));
            Ok(page.respond(StatusCode::OK, view(&checked, &member_relay_url(&headers))))
        }
        .await,
    )
}

/// The relay's URL as the browser reached it, for the command the page gives.
fn member_relay_url(headers: &HeaderMap) -> String {
    let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1:7300");
    let loopback = host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]");
    format!("{}://{host}", if loopback { "http" } else { "https" })
}

fn view(c: &Checked, relay_url: &str) -> Markup {
    html! {
        h2 { "Verification" }
        @match &c.opened {
            Err(e) => {
                p.notice.error role="alert" #verdict { (state("failed")) " " (svc_web::text::prose(&e.to_string())) }
            }
            Ok((catalog, digest)) => {
                @let valid = catalog.expires_at > c.now;
                ul #verdict {
                    li { (state("passed")) " The signature verifies against the catalog's signing key " (svc_web::text::id(&catalog.signing_key.to_string()))  "." }
                    @match c.rotation_signed {
                        Some(true) => li { (state("passed")) " It replaced key " (svc_web::text::id(&catalog.previous_key.map(|k| k.to_string()).unwrap_or_default()))  ", which signed the rotation statement." },
                        Some(false) => li { (state("failed")) " The rotation statement beside it is not signed by the key it replaces." },
                        None => li { "No key rotation: this key has signed every catalog so far." },
                    }
                    @if valid {
                        li { (state("passed")) " Valid until " (at(catalog.expires_at)) " (signed " (at(catalog.issued_at)) ", sequence " (catalog.sequence) ")." }
                    } @else {
                        li { (state("failed")) " Expired at " (at(catalog.expires_at)) "." }
                    }
                }
                p.muted {
                    "Whether that key is this relay's is for you to check with its operator. Pin it, and your CLI refuses any catalog it did not sign:"
                }
                @let command = format!("svc ingress catalog verify --relay {relay_url} --pin {}", catalog.signing_key);
                div.record {
                    code #pin-command { (command) }
                    " "
                    button.plain type="button" data-copy=(command) aria-label="Copy the command that pins the catalog key" { "Copy" }
                }
                h2 { "Contents" }
                dl.facts {
                    dt { "Relay" } dd { (catalog.relay) }
                    dt { "Digest" } dd { (svc_web::text::id(&digest.to_string())) }
                    dt { "Price" } dd #price { @if catalog.prices.currency == crate::catalog::CURRENCY { (svc_execution::money::usd_per(catalog.prices.price_micros, catalog.prices.period_secs)) " " span.muted { "(" (catalog.prices.price_micros) " " (catalog.prices.currency) ")" } } @else { (catalog.prices.price_micros) " " (catalog.prices.currency) " per period of " (catalog.prices.period_secs) " s" } }
                }
                h3 { "Gateways" }
                @if catalog.gateways.is_empty() {
                    p.muted { "None admitted yet (" code { "gateway-prep" } " admits one); routes use the relay's own gateway." }
                } @else {
                    div.table-wrap {
                        table #gateways {
                            thead { tr { th scope="col" { "Operator" } th scope="col" { "Hostname" } th scope="col" { "Key" } } }
                            tbody { @for g in &catalog.gateways { tr { td { (g.operator) } td { (g.hostname) } td { (svc_web::text::id(&g.public_key.to_string())) } } } }
                        }
                    }
                }
                h3 { "Route validators" }
                div.table-wrap {
                    table #validators {
                        thead { tr { th scope="col" { "Version" } th scope="col" { "Digest" } } }
                        tbody { @for v in &catalog.validators { tr { td { (v.version) } td { (svc_web::text::id(&v.digest.to_string())) } } } }
                    }
                }
                h3 { "Certificate authorities" }
                div.table-wrap {
                    table #authorities {
                        thead { tr { th scope="col" { "Kind" } th scope="col" { "Name" } th scope="col" { "CAA identities" } } }
                        tbody { @for a in &catalog.certificate_authorities { tr { td { (a.kind) } td { (a.name) } td { (a.caa_identities.join(", ")) } } } }
                    }
                }
            }
        }
        details {
            summary { "The signed catalog, as served" }
            pre.document tabindex="0" { (serde_json::to_string_pretty(&c.signed).unwrap_or_default()) }
        }
    }
}
