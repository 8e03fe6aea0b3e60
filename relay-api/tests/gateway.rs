//! The gateway in process on loopback, with real sockets and real TLS: its refusals, the
//! deadlines of routed connections, exact slot accounting across route refreshes (a soak of
//! 200,000 connections), the attacks of issue 14 against it and the agent behind it (one
//! address, five addresses holding a whole route, floods of pending connections under
//! `ulimit -n 1024`), and its accept loops out of descriptors. One binary, a module per
//! concern; the shared world is here: a gateway with one route and an in-test agent that
//! speaks the real tunnel protocol but does not terminate TLS.

mod gateway {
    mod accept;
    mod attacks;
    mod child;
    mod fairness;
    mod floods;
    mod guards;
    mod pool;
    mod refusals;
    mod replicas;
    mod soak;
    mod standby;
    mod starvation;

    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    use std::sync::Arc;
    use std::time::Duration;

    use agent::wire::{self, Control, DATA_MAGIC, TICKET_LEN};
    use relay_api::ca::DevCa;
    use relay_api::gateway::{Bound, Gateway, GatewayConfig, RouteConfig};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// The route's hostname.
    pub(super) const HOST: &str = "a.localhost";
    /// The route's ID.
    pub(super) const ROUTE: &str = "r1";
    /// The route's credential for the coordinator's agent API.
    pub(super) const CREDENTIAL: &str = "credential";

    /// The route's key: its agents sign their tunnel `Hello` and the challenge with it. A
    /// fixed test key (made for these tests, guarding nothing), so that a gateway in a child
    /// process (the flood tests') knows the same route as the parent's agents.
    pub(super) fn route_key() -> &'static agent::challenge::RouteKey {
        const TEST_ROUTE_KEY: &str = "MFECAQEwBQYDK2VwBCIEINjfvnsZVztUGGHK1gz4oOTVat9K98TIII2Uvf5nhVWRgSEAfxSZJPsXfw9ykfFhaAAPTZRVoi3B8j-vBEJtq6gE8MQ";
        static KEY: std::sync::OnceLock<agent::challenge::RouteKey> = std::sync::OnceLock::new();
        KEY.get_or_init(|| agent::challenge::RouteKey::from_text(TEST_ROUTE_KEY).expect("the test route key"))
    }

    /// A gateway on loopback with route [`ROUTE`], and the development CA that signed its
    /// tunnel certificate.
    pub(super) struct World {
        pub(super) gateway: Arc<Gateway>,
        pub(super) bound: Bound,
        pub(super) ca: DevCa,
        pub(super) ca_pem: String,
        /// The tunnel port's certificate chain (PEM).
        pub(super) tunnel_chain: String,
        pub(super) _dir: tempfile::TempDir,
    }

    /// Route [`ROUTE`] for [`HOST`].
    pub(super) fn route(max_connections: usize) -> RouteConfig {
        RouteConfig {
            route_id: ROUTE.into(),
            hostnames: vec![HOST.into()],
            route_public_key: route_key().public_key(),
            proxy_protocol: false,
            max_connections,
            standby: false,
            guards: relay_api::gateway::Guards::default(),
        }
    }

    /// Starts a gateway with `route`, a 1 s ClientHello limit and 1 s heartbeats, and the
    /// rest of its configuration as `tune` leaves it.
    pub(super) async fn start(name: &str, route: RouteConfig, tune: impl FnOnce(&mut GatewayConfig)) -> World {
        let dir = tempfile::Builder::new().prefix(&format!("svc-gateway-{name}-")).tempdir().expect("a scratch");
        let ca = DevCa::open(dir.path()).expect("CA");
        let (chain, key) = ca.issue(&["gateway.localhost".to_owned()], Duration::from_secs(3600)).expect("cert");
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let tunnel_chain = chain.clone();
        let mut config = GatewayConfig::new(any, any, any, chain, key);
        config.client_hello_timeout = Duration::from_secs(1);
        config.heartbeat = Duration::from_secs(1);
        tune(&mut config);
        let gateway = Gateway::new(config);
        gateway.set_routes(vec![route]);
        let (_task, bound) = gateway.clone().start().await.expect("the gateway starts");
        let ca_pem = ca.cert_pem().to_owned();
        World { gateway, bound, ca, ca_pem, tunnel_chain, _dir: dir }
    }

    /// What the in-test agent does with each data connection, once it has presented the
    /// ticket.
    #[derive(Debug, Clone, Copy)]
    pub(super) enum Answer {
        /// Reads until the gateway's end, then closes.
        ReadToEnd,
        /// Reads until the gateway's end, then keeps its side open for ever: a peer that never
        /// closes (its socket would sit in CLOSE-WAIT).
        NeverClose,
        /// Reads the ClientHello (`hello_len` bytes), answers `ok`, reads until the gateway's
        /// end, then resets (no TIME-WAIT: the soak opens many connections).
        Reply { hello_len: usize },
        /// Sends its `SVCD` tag one byte at a time, 100 ms apart, then behaves as `ReadToEnd`.
        SlowTag,
    }

    /// Connects an agent for route [`ROUTE`] that handles every data connection as `answer`
    /// says, and waits until the gateway counts it.
    pub(super) async fn test_agent(world: &World, answer: Answer) {
        connect_agent(world.bound.tunnel, &world.ca_pem, answer).await;
        let gateway = world.gateway.clone();
        let counted = eventually(Duration::from_secs(5), || {
            gateway.route_rows().iter().any(|r| r.route_id == ROUTE && r.agents == 1)
        })
        .await;
        assert!(counted, "the gateway counts the agent");
    }

    /// Connects an agent for route [`ROUTE`] to the tunnel port at `tunnel` (whose
    /// certificate `ca_pem` signed), and returns once it is welcomed; it then handles every
    /// data connection as `answer` says, for as long as the runtime runs.
    pub(super) async fn connect_agent(tunnel: SocketAddr, ca_pem: &str, answer: Answer) {
        let mut stream = open_session(tunnel, ca_pem, "").await;
        assert!(matches!(wire::read_frame(&mut stream).await.expect("welcome"), Control::Welcome { .. }));
        tokio::spawn(async move {
            let (mut reader, mut writer) = tokio::io::split(stream);
            tokio::spawn(async move {
                let mut seq = 0;
                loop {
                    seq += 1;
                    if wire::write_frame(&mut writer, &Control::Ping { seq, ready: None, acme: false }).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            });
            while let Ok(frame) = wire::read_frame(&mut reader).await {
                if let Control::Connect { ticket, .. } = frame {
                    let ticket = wire::unhex::<TICKET_LEN>(&ticket).expect("ticket");
                    tokio::spawn(data_connection(tunnel, ticket, answer));
                }
            }
        });
    }

    async fn data_connection(tunnel: SocketAddr, ticket: [u8; TICKET_LEN], answer: Answer) {
        let Ok(mut data) = TcpStream::connect(tunnel).await else { return };
        if let Answer::SlowTag = answer {
            for byte in DATA_MAGIC {
                if data.write_all(&[*byte]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if data.write_all(&ticket).await.is_err() {
                return;
            }
        } else if data.write_all(&[DATA_MAGIC.as_slice(), &ticket].concat()).await.is_err() {
            return;
        }
        if let Answer::Reply { hello_len } = answer {
            let mut hello = vec![0u8; hello_len];
            if data.read_exact(&mut hello).await.is_err() || data.write_all(b"ok").await.is_err() {
                return;
            }
        }
        let mut sink = [0u8; 256];
        while matches!(data.read(&mut sink).await, Ok(n) if n > 0) {}
        match answer {
            Answer::NeverClose => std::future::pending::<()>().await,
            Answer::Reply { .. } => {
                let _ = data.set_zero_linger();
            }
            Answer::ReadToEnd | Answer::SlowTag => {}
        }
    }

    /// The bytes of a real ClientHello for `name`.
    pub(super) fn client_hello(ca_pem: &str, name: &str) -> Vec<u8> {
        hello_offering(ca_pem, name, Vec::new())
    }

    /// The bytes of a real ClientHello for `name` offering the ALPN protocols `alpn`.
    pub(super) fn hello_offering(ca_pem: &str, name: &str, alpn: Vec<Vec<u8>>) -> Vec<u8> {
        let mut config = (*agent::tunnel::client_config(ca_pem).expect("client config")).clone();
        config.alpn_protocols = alpn;
        let server = rustls::pki_types::ServerName::try_from(name.to_owned()).expect("name");
        let mut conn = rustls::ClientConnection::new(Arc::new(config), server).expect("client");
        let mut bytes = Vec::new();
        conn.write_tls(&mut bytes).expect("hello");
        bytes
    }

    /// The control frames an in-test agent's session receives, read by a task of their own
    /// (a `select!` beside a ping ticker would otherwise cancel a read halfway through a
    /// frame); the caller aborts the task when its agent ends.
    pub(super) fn control_frames<R>(
        mut reader: R,
    ) -> (tokio::task::JoinHandle<()>, tokio::sync::mpsc::Receiver<Control>)
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let (frames_tx, frames) = tokio::sync::mpsc::channel(64);
        let reading = tokio::spawn(async move {
            while let Ok(frame) = wire::read_frame(&mut reader).await {
                if frames_tx.send(frame).await.is_err() {
                    return;
                }
            }
        });
        (reading, frames)
    }

    /// An agent's control connection to the tunnel port at `tunnel` (whose certificate
    /// `ca_pem` signed), its `Hello` for route [`ROUTE`] as replica `replica` sent: what the
    /// gateway answers is the caller's to read.
    pub(super) async fn open_session(
        tunnel: SocketAddr,
        ca_pem: &str,
        replica: &str,
    ) -> tokio_rustls::client::TlsStream<TcpStream> {
        let tls = agent::tunnel::client_config(ca_pem).expect("client config");
        let tcp = TcpStream::connect(tunnel).await.expect("tunnel");
        let name = rustls::pki_types::ServerName::try_from("gateway.localhost").expect("name");
        let mut stream = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.expect("TLS");
        let hello = Control::hello(route_key(), ROUTE, replica, stream.get_ref().1).expect("a TLS 1.3 session");
        wire::write_frame(&mut stream, &hello).await.expect("hello");
        stream
    }

    /// Reads until the gateway closes (at most 5 s); every byte it sent, and how long it took.
    pub(super) async fn drained(stream: &mut TcpStream) -> (Vec<u8>, Duration) {
        let start = std::time::Instant::now();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut got)).await;
        (got, start.elapsed())
    }

    /// Whether `done` holds within `limit` (checked every 10 ms).
    pub(super) async fn eventually(limit: Duration, done: impl Fn() -> bool) -> bool {
        let start = tokio::time::Instant::now();
        loop {
            if done() {
                return true;
            }
            if start.elapsed() > limit {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every public connection outcome but `routed`, with its count.
    pub(super) fn refusals(gateway: &Gateway) -> BTreeMap<&'static str, u64> {
        let mut outcomes = gateway.metrics.outcome_counts();
        outcomes.remove("routed");
        outcomes
    }

    /// The value of the active-connections gauge of `route` in the rendered metrics.
    pub(super) fn active_gauge(gateway: &Gateway, route: &str) -> Option<u64> {
        let series = format!("svc_gateway_route_active_connections{{route=\"{route}\"}} ");
        gateway.render_metrics().lines().find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
    }

    /// The open files the descriptor-heavy tests of this binary hold when they run at once:
    /// the two floods' 2,200 sockets each, the lock-out's and the fairness test's four
    /// descriptors for each of their 1,100 and 1,280 connections, and room to spare.
    const OPEN_FILES: u64 = 20_000;

    /// Raises this process's soft open-files limit to [`OPEN_FILES`] (within the hard limit),
    /// or fails the test: a shell's default (often 1,024) is too low for the floods, and a test
    /// that skipped for it never ran where that default holds.
    pub(super) fn raise_open_files_limit() {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current.is_none_or(|soft| soft >= OPEN_FILES) {
            return;
        }
        if limit.maximum.is_some_and(|hard| hard < OPEN_FILES) {
            panic!(
                "this test needs {OPEN_FILES} open files and the hard limit is {:?}: raise it (as root, `ulimit -Hn {OPEN_FILES}`)",
                limit.maximum
            );
        }
        let raised = Rlimit { current: Some(OPEN_FILES), maximum: limit.maximum };
        setrlimit(Resource::Nofile, raised)
            .unwrap_or_else(|e| panic!("raising the open-files limit to {OPEN_FILES}: {e}"));
    }
}
