//! The console's assets, embedded: `GET /console/assets/{name}`, with an ETag of their
//! digest so a browser asks again cheaply.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../assets/console.css"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/console.js"),
    },
];

/// Where the assets are served.
pub const PREFIX: &str = "/console/assets/";

/// The route's path pattern.
pub const ROUTE: &str = "/console/assets/{name}";

fn etag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// The handler of [`ROUTE`]: the file, 304 for a browser that has it, 404 for any other name.
pub async fn serve(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "no such asset")
            .into_response();
    };
    let tag = etag(asset.bytes);
    let fresh = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v == tag);
    let mut response =
        if fresh { StatusCode::NOT_MODIFIED.into_response() } else { (StatusCode::OK, asset.bytes).into_response() };
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_small_and_the_script_has_no_inline_handlers_to_allow() {
        for asset in ASSETS {
            assert!(asset.bytes.len() < 16 * 1024, "{} is {} bytes", asset.name, asset.bytes.len());
        }
        let script = std::str::from_utf8(ASSETS[1].bytes).expect("UTF-8");
        assert!(!script.contains("eval(") && !script.contains("innerHTML = \"<"), "no script built from strings");
    }
}
