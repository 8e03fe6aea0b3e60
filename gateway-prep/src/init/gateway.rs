//! The gateway configuration init writes (`/etc/svc-gateway/gateway.json`): the addresses
//! given (or those configured, or the defaults), the tunnel files, and the coordinator whose
//! route feed the gateway follows as the registered operator.

use std::net::SocketAddr;
use std::path::PathBuf;

use relay_gateway::file::{FeedSource, GatewayFile};

use crate::init::settings::Settings;
use crate::layout;

/// The configuration for `settings`, following `coordinator` as operator `operator_id`
/// (empty until registered). `existing` is the file on the host, if it parses: a re-run keeps
/// its addresses and coordinator CA (only a flag given now changes one) and its routes
/// (routes are the gateway's to change). The files named beside it are relative to it, so a
/// host prepared under `--root` runs as is.
pub fn config(settings: &Settings, existing: Option<GatewayFile>, coordinator: &str, operator_id: &str) -> GatewayFile {
    let address = |given: Option<SocketAddr>, configured: Option<SocketAddr>, default: &str| {
        given.or(configured).unwrap_or_else(|| default.parse().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))))
    };
    let ca = settings.coordinator_ca.clone().or_else(|| existing.as_ref()?.coordinator.as_ref()?.ca.clone());
    GatewayFile {
        public: address(settings.public, existing.as_ref().map(|f| f.public), layout::PUBLIC),
        tunnel: address(settings.tunnel, existing.as_ref().map(|f| f.tunnel), layout::TUNNEL),
        admin: address(settings.admin, existing.as_ref().map(|f| f.admin), layout::ADMIN),
        tunnel_cert: PathBuf::from(layout::TUNNEL_CERT),
        tunnel_key: PathBuf::from(layout::TUNNEL_KEY),
        client_hello_max_bytes: None,
        client_hello_timeout_secs: None,
        idle_timeout_secs: None,
        half_close_linger_secs: None,
        client_share_percent: None,
        client_hellos_per_client: None,
        pool_per_replica: None,
        coordinator: Some(FeedSource {
            url: coordinator.to_owned(),
            operator_id: operator_id.to_owned(),
            operator_key: PathBuf::from(layout::OPERATOR_KEY),
            ca,
        }),
        routes: existing.map(|f| f.routes).unwrap_or_default(),
    }
}

/// The same configuration following the feed as `operator_id` (known once registered).
pub fn with_operator(mut file: GatewayFile, operator_id: &str) -> GatewayFile {
    if let Some(feed) = &mut file.coordinator {
        operator_id.clone_into(&mut feed.operator_id);
    }
    file
}

/// The file's text: pretty JSON, newline-terminated.
pub fn text(file: &GatewayFile) -> String {
    let mut text = serde_json::to_string_pretty(file).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Root;

    fn settings(change: impl FnOnce(&mut Settings)) -> Settings {
        let mut settings = Settings::new(Root::new("/nonexistent"));
        change(&mut settings);
        settings
    }

    #[test]
    fn a_first_run_takes_the_defaults_and_names_its_files_beside_it() {
        let file = config(&settings(|_| ()), None, "http://127.0.0.1:7080", "");
        assert_eq!(
            (file.public.to_string(), file.tunnel.to_string(), file.admin.to_string()),
            (layout::PUBLIC.to_owned(), layout::TUNNEL.to_owned(), layout::ADMIN.to_owned())
        );
        assert_eq!(file.tunnel_key, PathBuf::from("tunnel.key"));
        let feed = file.coordinator.clone().expect("a feed");
        assert_eq!((feed.url.as_str(), feed.operator_id.as_str()), ("http://127.0.0.1:7080", ""));
        assert_eq!(feed.operator_key, PathBuf::from("operator.key"));
        let registered = with_operator(file, "op_1");
        assert_eq!(registered.coordinator.expect("a feed").operator_id, "op_1");
    }

    #[test]
    fn a_re_run_keeps_what_is_configured_unless_a_flag_changes_it() {
        let existing: GatewayFile = serde_json::from_str(
            r#"{"public":"0.0.0.0:8443","tunnel":"0.0.0.0:9443","admin":"127.0.0.1:9999",
                "tunnelCert":"tunnel.crt","tunnelKey":"tunnel.key",
                "coordinator":{"url":"https://old","operatorId":"op_1","operatorKey":"operator.key","ca":"ca.pem"},
                "routes":[{"routeId":"rt_1","hostnames":["a.example.test"],
                           "routePublicKey":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}"#,
        )
        .expect("a gateway file");
        let admin: SocketAddr = "127.0.0.1:7000".parse().expect("addr");
        let file = config(&settings(|o| o.admin = Some(admin)), Some(existing), "https://relay", "op_1");
        assert_eq!((file.public.port(), file.tunnel.port(), file.admin), (8443, 9443, admin));
        assert_eq!(file.routes.len(), 1, "the routes are the gateway's");
        let feed = file.coordinator.expect("a feed");
        assert_eq!((feed.url.as_str(), feed.ca), ("https://relay", Some(PathBuf::from("ca.pem"))));
        assert!(text(&with_operator(config(&settings(|_| ()), None, "u", "op"), "op")).ends_with("}\n"));
    }
}
