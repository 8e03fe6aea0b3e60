//! The certificate's life: the first certificate, renewal after two thirds of its lifetime,
//! and a new certificate whenever the route's hostnames change. With a coordinator
//! configured, the agent asks it for the hostnames every `refreshSecs`; one certificate
//! covers them all, with the same key. Each new certificate is swapped into the resolver for
//! new handshakes; open connections keep theirs.
//!
//! Retries: a new set of names (the first certificate included) is retried every 2 s with the
//! development CA, and from 2 s doubling up to 5 minutes with an ACME CA, to stay within
//! public CAs' failed-validation limits; meanwhile the names already certified are still
//! renewed when due. A failed renewal of the same names retries every lifetime/20 (1-10 s).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::KeyPair;
use tokio::time::Instant;

use crate::cert::{self, CertError, CurrentCert};
use crate::config::{AgentConfig, CertificateSource};
use crate::hostnames::{self, Hostnames};

/// The first wait after a failed new set of names.
const FIRST_RETRY: Duration = Duration::from_secs(2);

/// Keeps a valid certificate for the route's current hostnames installed in `current`, for
/// ever.
pub(crate) async fn run(
    config: AgentConfig,
    key: KeyPair,
    current: Arc<CurrentCert>,
    names: Arc<Hostnames>,
    hosts: Arc<crate::tunnel::Tunnels>,
    state_dir: PathBuf,
) {
    let refresh = Duration::from_secs(config.refresh_secs.max(1));
    let retry_cap = match config.certificate {
        CertificateSource::DevCa { .. } => FIRST_RETRY,
        CertificateSource::Acme { .. } => Duration::from_secs(300),
    };
    let mut refreshing = Refreshing {
        failing: SaidOnce::default(),
        check: crate::gateways::GatewayCheck::new(config.catalog_key),
        gateways_note: SaidOnce::default(),
    };
    // The names on the installed certificate, its lifetime and when to renew it.
    let mut certified: Option<(Arc<[String]>, Duration, Instant)> = None;
    // When to try a new set of names next, and the wait after another failure.
    let (mut retry_at, mut retry_wait) = (Instant::now(), FIRST_RETRY);
    // Asked at once: the first certificate should cover every name the route already has.
    let mut next_refresh = Instant::now();
    loop {
        if config.coordinator.is_some() && Instant::now() >= next_refresh {
            refresh_names(&config, &names, &hosts, &mut refreshing).await;
            next_refresh = Instant::now() + refresh;
        }
        let wanted = names.current();
        let new_set = certified.as_ref().is_none_or(|(on_cert, ..)| !hostnames::same_set(on_cert, &wanted));
        if new_set && Instant::now() >= retry_at {
            match install(&config, &wanted, &key, &current, &state_dir).await {
                Ok(lifetime) => {
                    certified = Some((wanted, lifetime, Instant::now() + cert::renew_after(lifetime)));
                    retry_wait = FIRST_RETRY;
                    continue;
                }
                Err(e) => {
                    tracing::warn!("svc agent: certificate: {e}; retrying in {} s", retry_wait.as_secs());
                    retry_at = Instant::now() + retry_wait;
                    retry_wait = (retry_wait * 2).min(retry_cap);
                }
            }
        }
        if let Some((on_cert, lifetime, renew_at)) = &mut certified
            && Instant::now() >= *renew_at
        {
            // The names already certified: a pending new set must not let them expire.
            *renew_at = match install(&config, on_cert, &key, &current, &state_dir).await {
                Ok(l) => {
                    *lifetime = l;
                    Instant::now() + cert::renew_after(l)
                }
                Err(e) => {
                    tracing::warn!("svc agent: renewal: {e}; retrying");
                    Instant::now() + (*lifetime / 20).clamp(Duration::from_secs(1), Duration::from_secs(10))
                }
            };
            continue;
        }
        let mut wake = certified.as_ref().map_or(retry_at, |(.., renew_at)| *renew_at);
        if new_set {
            wake = wake.min(retry_at);
        }
        if config.coordinator.is_some() {
            wake = wake.min(next_refresh);
        }
        tokio::time::sleep_until(wake).await;
    }
}

/// What the route refresh keeps from one round to the next.
struct Refreshing {
    /// Why the refresh fails.
    failing: SaidOnce,
    /// The check of the gateway hosts a refresh names.
    check: crate::gateways::GatewayCheck,
    /// What is wrong with those hosts.
    gateways_note: SaidOnce,
}

/// A warning said once while it repeats.
#[derive(Default)]
struct SaidOnce(Option<String>);

impl SaidOnce {
    /// Logs `warning` unless it was the last one said; `None`: all is well again.
    fn say(&mut self, warning: Option<String>) {
        if let Some(warning) = &warning
            && self.0.as_ref() != Some(warning)
        {
            tracing::warn!("svc agent: {warning}");
        }
        self.0 = warning;
    }
}

/// Asks the coordinator for the route's hostnames and gateway hosts and takes them if they
/// changed; keeps the old ones on failure, saying so once per distinct error. The gateway
/// hosts are taken as far as the relay's signed catalog vouches for them
/// ([`crate::gateways`]).
async fn refresh_names(
    config: &AgentConfig,
    names: &Hostnames,
    hosts: &crate::tunnel::Tunnels,
    refreshing: &mut Refreshing,
) {
    match hostnames::fetch(config).await {
        Some(Ok(fresh)) => {
            refreshing.failing.say(None);
            let listed = fresh.names.join(", ");
            if names.replace(fresh.names) {
                tracing::info!("svc agent: route {} now has hostnames {listed}", config.route_id);
            }
            let Some(named) = fresh.gateways else { return };
            let vouched = match refreshing.check.vouch(named.clone(), fresh.catalog.as_ref(), crate::gateways::now_ms())
            {
                Ok(vouched) => vouched,
                Err(e) => {
                    // Nothing new is taken unvouched; a host no longer named is dropped all
                    // the same (leaving needs no proof).
                    refreshing.gateways_note.say(Some(format!("{e}; taking no new gateway host")));
                    let kept: Vec<_> = hosts.hosts().into_iter().filter(|h| named.contains(h)).collect();
                    hosts.reconcile(&kept);
                    return;
                }
            };
            let refused: Vec<&str> = vouched.refused.iter().map(|g| g.address.as_str()).collect();
            refreshing.gateways_note.say((!refused.is_empty()).then(|| {
                format!(
                    "not tunnelling to gateway hosts the relay's signed catalog does not list (with that \
                     certificate): {}",
                    refused.join(", ")
                )
            }));
            if hosts.reconcile(&vouched.taken) > 0 {
                tracing::info!(
                    "svc agent: route {} is served by {} gateway hosts now",
                    config.route_id,
                    vouched.taken.len()
                );
            }
        }
        Some(Err(e)) => refreshing.failing.say(Some(format!("the route's hostnames: {e}; keeping the current ones"))),
        None => {}
    }
}

/// Obtains and installs a certificate for `hostnames`, keeping a copy in `cert.pem`; its
/// lifetime.
async fn install(
    config: &AgentConfig,
    hostnames: &[String],
    key: &KeyPair,
    current: &CurrentCert,
    state_dir: &Path,
) -> Result<Duration, CertError> {
    let (chain, lifetime) = crate::issue::obtain(config, hostnames, key, current, state_dir).await?;
    current.install(&chain, key)?;
    cert::save_chain(state_dir, &chain)?;
    tracing::info!("svc agent: certificate for {} installed (valid {} s)", hostnames.join(", "), lifetime.as_secs());
    Ok(lifetime)
}
