//! Bounded intake on `svc serve` (issue 39, point 5): publication bodies over 64 KiB are read
//! two at a time per organization and eight in all; beyond that a publication is answered 503
//! with `Retry-After` before its body is read, and other organizations are served meanwhile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use svc_e2e::flood::{PeakRss, assert_busy, send, status_kib, statuses};
use svc_e2e::service::token;

use super::World;

/// `a: 1` lines: a manifest of 870 KB (173,999 duplicate keys), the most a 1 MiB body holds; each
/// is read, validated whole and refused 422 with 1,000 problems.
const LINES: usize = 174_000;

/// How far above its level before the flood `svc serve`'s RSS may go: two publications of this
/// manifest at a time cost a few MiB each (heaptrack: 3.5 MB of heap for one, plus its body);
/// 150 bodies read at once, as before the bound, were 150 MiB of bodies alone.
const PEAK_ABOVE_KIB: u64 = 64 * 1024;

/// How far above its level before the flood its RSS may stay once settled.
const SETTLED_ABOVE_KIB: u64 = 32 * 1024;

/// `svc serve`'s RSS after `rounds` light requests half a second apart, and more until it is at
/// most `target` KiB or 30 s have passed.
fn settled_kib(w: &World, rounds: usize, target: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    for round in 1.. {
        assert_eq!(w.server.request("GET", "/api/capabilities", Some(&w.token), None).status, 200);
        std::thread::sleep(Duration::from_millis(500));
        let rss = status_kib(w.server.pid(), "VmRSS");
        if round >= rounds && (rss <= target || Instant::now() >= deadline) {
            return rss;
        }
    }
    unreachable!("the rounds end")
}

/// 150 publications of an 870 KB manifest at once from one organization: two are read and
/// judged (422) at a time, the others refused 503 at once, and `svc serve` stays within 64 MiB
/// of its level before and gives the memory back; another organization's small request and
/// large publication are answered meanwhile.
#[test]
fn concurrent_large_publishes_are_read_two_at_a_time_and_the_others_refused_503() {
    let w = World::new("intake-publish");
    w.create("web");
    let other = token(w.dir.str(), "other", "developer");
    let created = w.server.request("POST", "/api/applications", Some(&other), Some(&json!({"applicationId": "app"})));
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    let body = Arc::new(serde_json::to_vec(&json!({"manifest": "a: 1\n".repeat(LINES)})).expect("json"));
    assert!(body.len() <= manifest_core::service::MAX_BODY_BYTES, "{} bytes", body.len());
    let (addr, pid) = (w.server.addr, w.server.pid());
    let path = "/api/applications/web/policy-versions";
    // One first, read whole: the level before includes what one such publication leaves.
    let (first, _) = send(addr, &w.token, "POST", path, body.clone());
    assert_eq!(first.status, 422, "{}", String::from_utf8_lossy(&first.body));
    let before = settled_kib(&w, 4, 0);

    let sampler = PeakRss::start(pid);
    let flood: Vec<_> = (0..150)
        .map(|_| {
            let (token, body) = (w.token.clone(), body.clone());
            std::thread::spawn(move || send(addr, &token, "POST", path, body))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (small, small_took) = send(addr, &other, "GET", "/api/capabilities", Arc::default());
    let (large, large_took) = send(addr, &other, "POST", "/api/applications/app/policy-versions", body.clone());
    let answers: Vec<_> = flood.into_iter().map(|t| t.join().expect("a request")).collect();
    let peak = sampler.finish();
    let hwm = status_kib(pid, "VmHWM");
    let after = settled_kib(&w, 4, before + SETTLED_ABOVE_KIB);

    let slowest_busy = answers.iter().filter(|(r, _)| r.status == 503).map(|(_, t)| *t).max();
    eprintln!(
        "svc serve: {before} KiB before, {peak} KiB at most while flooded (VmHWM {hwm} KiB), {after} KiB once \
         settled; answers {:?} (the slowest 503 after {slowest_busy:?}); the other organization's capabilities took \
         {small_took:?}, its publication {large_took:?}",
        statuses(answers.iter().map(|(r, _)| r))
    );
    for (r, _) in &answers {
        assert!([422, 503].contains(&r.status), "a publication answered {}: {}", r.status, w.server.stderr());
        if r.status == 503 {
            assert_busy(r);
        }
    }
    assert!(answers.iter().any(|(r, _)| r.status == 422), "every publication was refused");
    assert!(answers.iter().any(|(r, _)| r.status == 503), "no publication was refused: the bound did not hold");
    assert!(slowest_busy.is_some_and(|t| t < Duration::from_secs(10)), "a refusal took {slowest_busy:?}");
    assert_eq!(small.status, 200, "{}", String::from_utf8_lossy(&small.body));
    assert!(small_took < Duration::from_secs(2), "the other organization's request took {small_took:?}");
    assert_eq!(large.status, 422, "the other organization's publication: {}", String::from_utf8_lossy(&large.body));
    assert!(peak <= before + PEAK_ABOVE_KIB, "{before} KiB before the flood, {peak} KiB at most during it");
    assert!(after <= before + SETTLED_ABOVE_KIB, "RSS {before} KiB before the flood, {after} KiB once settled");
}
