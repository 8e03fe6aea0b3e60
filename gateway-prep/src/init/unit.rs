//! The systemd unit `svc-gateway.service`.

use std::path::Path;

/// The unit's text. The gateway runs as root's uid but with every capability dropped except
/// `CAP_NET_BIND_SERVICE` (port 443), no new privileges, a read-only file system and the
/// kernel's tunables and devices out of reach: it needs to read its 0600 tunnel key and to
/// listen, nothing more. `ExecReload` sends SIGHUP, which re-reads the routes.
pub fn unit(svc_binary: &Path, config: &Path, limit_nofile: u64, hostname: &str) -> String {
    format!(
        "# Written by gateway-prep init; edit it with `systemctl edit svc-gateway` (a drop-in),\n\
         # or gateway-prep init refuses to update it without --force. See docs/gateway-prep.md.\n\
         [Unit]\n\
         Description=svc ingress gateway ({hostname})\n\
         Wants=network-online.target\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={svc} gateway run --config {config}\n\
         ExecReload=/bin/kill -HUP $MAINPID\n\
         Restart=on-failure\n\
         RestartSec=2s\n\
         LimitNOFILE={limit_nofile}\n\
         StateDirectory=svc-gateway\n\
         CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n\
         AmbientCapabilities=CAP_NET_BIND_SERVICE\n\
         NoNewPrivileges=yes\n\
         ProtectSystem=strict\n\
         ProtectHome=yes\n\
         PrivateTmp=yes\n\
         PrivateDevices=yes\n\
         ProtectClock=yes\n\
         ProtectHostname=yes\n\
         ProtectKernelTunables=yes\n\
         ProtectKernelModules=yes\n\
         ProtectKernelLogs=yes\n\
         ProtectControlGroups=yes\n\
         RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n\
         RestrictNamespaces=yes\n\
         RestrictRealtime=yes\n\
         RestrictSUIDSGID=yes\n\
         LockPersonality=yes\n\
         MemoryDenyWriteExecute=yes\n\
         SystemCallArchitectures=native\n\
         SystemCallFilter=@system-service\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        svc = svc_binary.display(),
        config = config.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_the_gateway_hardened() {
        let text =
            unit(Path::new("/usr/local/bin/svc"), Path::new("/etc/svc-gateway/gateway.json"), 4096, "gw.example");
        assert!(text.contains("\nExecStart=/usr/local/bin/svc gateway run --config /etc/svc-gateway/gateway.json\n"));
        for line in ["NoNewPrivileges=yes", "AmbientCapabilities=CAP_NET_BIND_SERVICE", "LimitNOFILE=4096"] {
            assert!(text.contains(&format!("\n{line}\n")), "{line}");
        }
        assert_eq!(crate::check::unit_limit_nofile(&text), Some(4096));
    }
}
