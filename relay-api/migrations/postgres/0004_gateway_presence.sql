-- Version 4, SQLite's 0010: where each admitted gateway is, as it announced itself in its last signed route feed request
-- (`svc gateway run` following the feed): the addresses it listens on and the SHA-256 of its
-- tunnel certificate, which agents pin. An unspecified address (`0.0.0.0:443`) stands for the
-- operator's registered hostname with that port.
CREATE TABLE gateway_presence (
    operator_id    TEXT PRIMARY KEY REFERENCES operators(id),
    public_addr    TEXT NOT NULL,
    tunnel_addr    TEXT NOT NULL,
    tunnel_sha256  TEXT NOT NULL,
    seen_at        BIGINT NOT NULL   -- Unix ms of the last request
);
