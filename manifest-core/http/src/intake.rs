//! Large request bodies, bounded (issue 39, point 5): a body over [`LARGE_BODY_BYTES`] (a
//! deploy's app files, a big manifest) is read only under a permit, of which each tenant (the
//! organization its token speaks for) holds at most [`IntakeLimits::per_tenant`] and all
//! tenants together [`IntakeLimits::total`]. A body that declares a large `Content-Length` takes
//! its permit before any of it is read; a chunked one takes it as it passes the large size. With
//! no permit left the request is refused ([`Busy`]: 503 with `Retry-After`) and the body is never
//! read, so a flood of large bodies costs the service its permits' worth of memory and no more.
//! Small bodies (every other route's) never wait for a permit.
//!
//! The caller authenticates first (from the headers), then asks [`Intake::body`] for the body
//! and reads it whole ([`Incoming::bytes`]), bounded by the route's limit also when chunked (its
//! `Content-Length` was checked by [`crate::limit_body`]), into one buffer of its declared
//! length: not grown and copied as it arrives, which left the allocator holding freed memory
//! (docs/decisions.md, "Bounded intake").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use http_body_util::BodyExt as _;

/// A body over this many bytes is large: it is read only under a permit. Every request of
/// both APIs but a deploy or a publication of a big manifest is far below it.
pub const LARGE_BODY_BYTES: usize = 64 * 1024;

/// How many large bodies are read at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntakeLimits {
    /// Large bodies of one tenant at once.
    pub per_tenant: usize,
    /// Large bodies of all tenants at once.
    pub total: usize,
}

impl IntakeLimits {
    /// Two per tenant, eight in all: a tenant's deploy and its retry go through at once, and the
    /// largest bodies (18 MiB deploys) cost at most a few hundred MiB together.
    pub const DEFAULT: IntakeLimits = IntakeLimits { per_tenant: 2, total: 8 };

    /// The most of either accepted.
    pub const MAX: usize = 10_000;
}

impl Default for IntakeLimits {
    fn default() -> IntakeLimits {
        IntakeLimits::DEFAULT
    }
}

/// Why a large body is not read now: a bound is reached. The service answers 503 with
/// `Retry-After` ([`Busy::RETRY_AFTER`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Busy {
    /// The tenant sends this many large bodies already.
    #[error(
        "your organization is sending {0} large request bodies (over 64 KiB) already, the most it may at once; send \
         this one again once one of them is answered"
    )]
    Tenant(usize),
    /// The service reads this many large bodies already.
    #[error(
        "the service is reading {0} large request bodies (over 64 KiB) already, the most it reads at once; try again in \
         a moment"
    )]
    All(usize),
}

impl Busy {
    /// When to try again: a large body takes a second or two to read and check.
    pub const RETRY_AFTER: Duration = Duration::from_secs(2);

    /// `response` (the service's refusal) with `Retry-After`, and `Connection: close`: the body
    /// was not read, so the connection cannot carry another request.
    pub fn headers(response: &mut Response) {
        let headers = response.headers_mut();
        headers.insert(header::RETRY_AFTER, HeaderValue::from(Busy::RETRY_AFTER.as_secs()));
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
}

/// Why a body could not be had.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// A large body beyond the bounds (503).
    #[error(transparent)]
    Busy(#[from] Busy),
    /// More than the route takes arrived (a chunked body: a declared length over it is refused
    /// before the handler runs).
    #[error("the request body is over {max} bytes")]
    TooLarge {
        /// The route's limit.
        max: usize,
    },
    /// The body stopped arriving: the client hung up, or the body timeout passed (the server
    /// answers 408 then, whatever the handler says).
    #[error("the request body did not arrive whole: {0}")]
    Read(#[source] axum::Error),
}

/// The large bodies being read, shared by a router's handlers.
#[derive(Debug, Clone)]
pub struct Intake {
    limits: IntakeLimits,
    reading: Arc<Mutex<Reading>>,
}

/// Permits held: in all, and by tenant (a tenant holding none has no entry).
#[derive(Debug, Default)]
struct Reading {
    total: usize,
    by_tenant: HashMap<String, usize>,
}

impl Intake {
    /// No body read yet, under `limits`.
    pub fn new(limits: IntakeLimits) -> Intake {
        Intake { limits, reading: Arc::default() }
    }

    /// A permit to read one large body of `tenant` now, or the bound that is reached.
    pub fn admit(&self, tenant: &str) -> Result<IntakePermit, Busy> {
        let mut reading = self.reading.lock().unwrap_or_else(PoisonError::into_inner);
        let held = reading.by_tenant.get(tenant).copied().unwrap_or(0);
        if held >= self.limits.per_tenant {
            return Err(Busy::Tenant(self.limits.per_tenant));
        }
        if reading.total >= self.limits.total {
            return Err(Busy::All(self.limits.total));
        }
        reading.total += 1;
        reading.by_tenant.insert(tenant.to_owned(), held + 1);
        Ok(IntakePermit { reading: Arc::clone(&self.reading), tenant: tenant.to_owned() })
    }

    /// `body` of a request of `tenant` with `headers`, bounded to `max` bytes. A declared
    /// `Content-Length` over [`LARGE_BODY_BYTES`] takes its permit now ([`Busy`]: refuse the
    /// request before reading any of it); a chunked body takes one once that much has arrived.
    pub fn body(&self, tenant: &str, headers: &HeaderMap, body: Body, max: usize) -> Result<Incoming, Busy> {
        let declared: Option<usize> =
            headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
        let permit = match declared {
            Some(length) if length > LARGE_BODY_BYTES => Some(self.admit(tenant)?),
            _ => None,
        };
        Ok(Incoming { body, intake: self.clone(), tenant: tenant.to_owned(), max, declared, read: 0, permit })
    }
}

/// Leave to read one large body; given back when dropped. Keep it while what was read is in
/// memory (the body, what was decoded from it).
#[derive(Debug)]
pub struct IntakePermit {
    reading: Arc<Mutex<Reading>>,
    tenant: String,
}

impl Drop for IntakePermit {
    fn drop(&mut self) {
        let mut reading = self.reading.lock().unwrap_or_else(PoisonError::into_inner);
        reading.total = reading.total.saturating_sub(1);
        match reading.by_tenant.get_mut(&self.tenant) {
            Some(held) if *held > 1 => *held -= 1,
            _ => {
                reading.by_tenant.remove(&self.tenant);
            }
        }
    }
}

/// A request body being read: counted, bounded, and under a permit once large.
#[derive(Debug)]
pub struct Incoming {
    body: Body,
    intake: Intake,
    tenant: String,
    max: usize,
    declared: Option<usize>,
    read: usize,
    permit: Option<IntakePermit>,
}

impl Incoming {
    /// The next piece of the body, counted; `None` at its end.
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, IntakeError> {
        while let Some(frame) = self.body.frame().await {
            let Ok(data) = frame.map_err(IntakeError::Read)?.into_data() else { continue };
            self.read = self.read.saturating_add(data.len());
            if self.read > self.max {
                return Err(IntakeError::TooLarge { max: self.max });
            }
            if self.read > LARGE_BODY_BYTES && self.permit.is_none() {
                self.permit = Some(self.intake.admit(&self.tenant)?);
            }
            return Ok(Some(data));
        }
        Ok(None)
    }

    /// The whole body, in one buffer allocated at its declared length (not grown and copied
    /// as it arrives), with its permit if it is large.
    pub async fn bytes(mut self) -> Result<Received, IntakeError> {
        let mut buffer = Vec::with_capacity(self.declared.unwrap_or(0).min(self.max));
        while let Some(chunk) = self.next_chunk().await? {
            buffer.extend_from_slice(&chunk);
        }
        Ok(Received { bytes: Bytes::from(buffer), permit: self.permit })
    }
}

/// A body read whole.
#[derive(Debug)]
pub struct Received {
    /// The body.
    pub bytes: Bytes,
    /// Its permit, if it is large: keep it while the body is in memory.
    pub permit: Option<IntakePermit>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: IntakeLimits = IntakeLimits { per_tenant: 2, total: 3 };

    fn declared(length: usize) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        headers
    }

    #[test]
    fn a_tenant_holds_at_most_its_share_and_all_together_the_total() {
        let intake = Intake::new(LIMITS);
        let a1 = intake.admit("a").expect("a's first");
        let a2 = intake.admit("a").expect("a's second");
        assert_eq!(intake.admit("a").err(), Some(Busy::Tenant(2)));
        let b1 = intake.admit("b").expect("b's first: room in all");
        assert_eq!(intake.admit("b").err(), Some(Busy::All(3)), "b has room, the service has none");
        drop(a1);
        let b2 = intake.admit("b").expect("a gave one back");
        assert_eq!(intake.admit("c").err(), Some(Busy::All(3)));
        drop((a2, b1, b2));
        let reading = intake.reading.lock().expect("lock");
        assert_eq!((reading.total, reading.by_tenant.len()), (0, 0), "every permit given back, no tenant kept");
    }

    #[tokio::test]
    async fn a_large_declared_body_takes_its_permit_before_it_is_read_and_a_small_one_none() {
        let intake = Intake::new(IntakeLimits { per_tenant: 1, total: 8 });
        let big = vec![b'x'; LARGE_BODY_BYTES + 1];
        let first = intake.body("a", &declared(big.len()), Body::from(big.clone()), 1 << 20).expect("a permit");
        let refused = intake.body("a", &declared(big.len()), Body::from(big.clone()), 1 << 20);
        assert_eq!(refused.err(), Some(Busy::Tenant(1)), "refused before reading");
        // Small bodies never wait, whatever is held.
        let small = intake.body("a", &declared(3), Body::from("abc"), 1 << 20).expect("no permit needed");
        assert_eq!(&small.bytes().await.expect("read").bytes[..], b"abc");
        let received = first.bytes().await.expect("read");
        assert_eq!(received.bytes.len(), big.len());
        assert!(received.permit.is_some(), "held while the body is");
        assert!(intake.body("a", &declared(big.len()), Body::from(big.clone()), 1 << 20).is_err());
        drop(received);
        assert!(intake.body("a", &declared(big.len()), Body::from(big), 1 << 20).is_ok(), "given back");
    }

    /// A chunked body (no `Content-Length`) as a stream of pieces.
    fn chunked(pieces: usize, size: usize) -> Body {
        let stream = futures_util::stream::iter((0..pieces).map(move |_| Ok::<_, std::io::Error>(vec![b'y'; size])));
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn a_chunked_body_is_counted_as_it_arrives_takes_a_permit_once_large_and_stops_at_the_limit() {
        let intake = Intake::new(IntakeLimits { per_tenant: 1, total: 8 });
        let held = intake.admit("a").expect("a's one permit");
        let small = intake.body("a", &HeaderMap::new(), chunked(4, 1024), 1 << 20).expect("undeclared");
        assert_eq!(small.bytes().await.expect("4 KiB need no permit").bytes.len(), 4096);
        let large = intake.body("a", &HeaderMap::new(), chunked(20, 8192), 1 << 20).expect("undeclared");
        assert!(matches!(large.bytes().await, Err(IntakeError::Busy(Busy::Tenant(1)))), "refused once over 64 KiB");
        drop(held);
        let over = intake.body("a", &HeaderMap::new(), chunked(20, 8192), 100_000).expect("undeclared");
        assert!(matches!(over.bytes().await, Err(IntakeError::TooLarge { max: 100_000 })));
        let fits = intake.body("a", &HeaderMap::new(), chunked(20, 8192), 1 << 20).expect("undeclared");
        let received = fits.bytes().await.expect("a permit once large");
        assert_eq!(received.bytes.len(), 20 * 8192);
        assert!(received.permit.is_some());
    }
}
