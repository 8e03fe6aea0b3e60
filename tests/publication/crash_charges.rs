//! Issue 41, over the real `svc serve`: each `kill -9` of the service charged the customer
//! again (the slot's new attempt was charged the rest of its window: 10000, 9993, 9991 and
//! 9985 micros for one hour). Charges follow the paid window: the relaunch after the
//! service's own crash is charged nothing, and the time nothing served is refunded, each
//! refund a ledger entry of its own.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_e2e::service::{Server, accept_build_of, admin};

use super::{World, v5};

/// A job that stays up until it is stopped.
const STAY_UP: &str = "setInterval(() => {}, 1000);\n";

/// One entry of the spend ledger: generation, refund, micros.
type Entry = (u64, bool, u128);

/// Slot 0's ledger entries, in order (SQLite's file, or the PostgreSQL database).
fn ledger(w: &World) -> Vec<Entry> {
    const SQL: &str = "SELECT generation, refund, micros FROM spend_ledger WHERE slot = 0 ORDER BY id";
    let text = svc_e2e::service::postgres_sql(w.dir.path(), SQL).unwrap_or_else(|| {
        svc_e2e::service::sqlite_rows(&w.dir.path().join(manifest_core::service::store::DATABASE_FILE), SQL)
    });
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let c: Vec<&str> = line.split('|').collect();
            let generation = c[0].parse().unwrap_or_else(|_| panic!("generation of {line:?}"));
            let refund = matches!(c[1], "1" | "t" | "true");
            let micros = c[2].parse().unwrap_or_else(|_| panic!("micros of {line:?}"));
            (generation, refund, micros)
        })
        .collect()
}

/// Waits (at most 20 s) for the application's one slot to be ready; its attempt.
fn ready_attempt(w: &World, app: &str, at_least: u64) -> (u64, u64) {
    // A restarted service on PostgreSQL answers from the store before it has the killed
    // one's scheduling lease (it runs out within 5 s): the attempt from before the kill still
    // reads ready until the new one's recovery (CI, on PostgreSQL: (1, 2) for (1, 3)).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = w.get(&format!("/api/applications/{app}/executions?limit=100"));
        let recent = answer["recent"].as_array().cloned().unwrap_or_default();
        let ready: Vec<&Value> = recent.iter().filter(|e| e["state"] == "ready").collect();
        let number = |v: &Value| v.as_u64().unwrap_or(0);
        if answer["convergence"]["state"] == "converged"
            && let [execution] = &ready[..]
            && number(&execution["attempt"]) >= at_least
        {
            return (number(&execution["generation"]), number(&execution["attempt"]));
        }
        assert!(
            Instant::now() < deadline,
            "{app}: attempt {at_least} not ready within 30 s:\n{answer:#}\n{}",
            w.server.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_kill_9s_of_the_service_in_one_window_charge_the_window_once_and_refund_the_downtime() {
    let mut w = World::new("crash-charges");
    let bundle = w.dir.path().join("bundle-web");
    std::fs::create_dir_all(&bundle).expect("bundle dir");
    std::fs::write(bundle.join("server.js"), STAY_UP).expect("server.js");
    let digest =
        admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", bundle.to_str().expect("UTF-8 path")]);
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", "1000000"]);
    let mut manifest = v5("web");
    manifest["execution"] = json!({"mode": "continuous"});
    manifest["deployment"]["jobs"] = json!(1);
    manifest["deployment"]["spend"]["rate"] = json!({"amount": "100000000", "window": "30d"});
    w.create("web");
    accept_build_of(w.dir.str(), "acme", "web", &digest);
    let r = w.publish("web", &json!({ "manifest": manifest }));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(ready_attempt(&w, "web", 1), (1, 1));
    let down = Duration::from_secs(4);
    for attempt in [2, 3] {
        w.server.signal("KILL");
        w.server.wait(Duration::from_secs(10)).expect("svc serve dies at SIGKILL");
        // Down long enough that the time nothing served is worth a micro.
        std::thread::sleep(down);
        w.server = Server::start(w.dir.path(), &[]);
        assert_eq!(ready_attempt(&w, "web", attempt), (1, attempt), "the same generation, a new attempt");
    }
    let entries = ledger(&w);
    eprintln!("slot 0's ledger (generation, refund, micros): {entries:?}");
    let charges: Vec<u128> = entries.iter().filter(|(g, r, _)| *g == 1 && !r).map(|e| e.2).collect();
    let refunds: Vec<u128> = entries.iter().filter(|(g, r, _)| *g == 1 && *r).map(|e| e.2).collect();
    assert_eq!(charges.len(), 1, "one window, one charge, whatever the crashes: {entries:?}");
    // At least the 2 x 4 s down of an hour's charge (rounded down), at most a few seconds more
    // per crash (the heartbeat's bound, a start, a step).
    let (charge, refunded) = (charges[0], refunds.iter().sum::<u128>());
    let hour = 3_600u128;
    assert!(refunded >= charge * 8 / hour, "refunded {refunded} of {charge}: {entries:?}");
    assert!(refunded <= charge * 30 / hour + 1, "refunded {refunded} of {charge}: {entries:?}");
    let status = w.server.stop();
    assert!(status.success(), "svc serve exited with {status:?}");
}
