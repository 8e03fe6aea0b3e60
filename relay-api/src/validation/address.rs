//! Which addresses the validator may dial. It dials only public unicast addresses: a route's
//! hostname is chosen by a customer, so without this rule validation would let anyone make
//! the coordinator connect to its own loopback, private network or cloud metadata service
//! (server-side request forgery). The rule applies to the resolved addresses actually dialed.
//!
//! The ranges are IANA's special-purpose registries (RFC 6890 and successors). IPv6 forms that
//! carry an IPv4 address (IPv4-mapped `::ffff:0:0/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`)
//! are judged by the IPv4 address they reach; outside `2000::/3` nothing is public.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not public.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NonPublic {
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`) or IPv6 unique local (`fc00::/7`).
    Private,
    /// Carrier-grade NAT, `100.64.0.0/10` (RFC 6598).
    SharedAddressSpace,
    /// `169.254.0.0/16` (cloud metadata services live here), `fe80::/10`.
    LinkLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15` (RFC 2544).
    Benchmarking,
    /// Reserved or special-purpose: `240/4`, `192.0.0/24`, `192.88.99/24`, IPv4-compatible
    /// `::/96`, `64:ff9b:1::/48`, `100::/64`, `2001::/23`, `5f00::/16`, site-local `fec0::/10`,
    /// and anything outside `2000::/3`.
    Reserved,
}

impl std::fmt::Display for NonPublic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NonPublic::Unspecified => "unspecified",
            NonPublic::Loopback => "loopback",
            NonPublic::Private => "private",
            NonPublic::SharedAddressSpace => "carrier-grade NAT (100.64.0.0/10)",
            NonPublic::LinkLocal => "link-local",
            NonPublic::Multicast => "multicast",
            NonPublic::Broadcast => "broadcast",
            NonPublic::Documentation => "documentation",
            NonPublic::Benchmarking => "benchmarking",
            NonPublic::Reserved => "reserved",
        })
    }
}

/// IPv4 special-purpose ranges, most specific first where they overlap.
const V4: &[([u8; 4], u8, NonPublic)] = &[
    ([255, 255, 255, 255], 32, NonPublic::Broadcast),
    ([0, 0, 0, 0], 8, NonPublic::Unspecified),
    ([10, 0, 0, 0], 8, NonPublic::Private),
    ([100, 64, 0, 0], 10, NonPublic::SharedAddressSpace),
    ([127, 0, 0, 0], 8, NonPublic::Loopback),
    ([169, 254, 0, 0], 16, NonPublic::LinkLocal),
    ([172, 16, 0, 0], 12, NonPublic::Private),
    ([192, 0, 0, 0], 24, NonPublic::Reserved),
    ([192, 0, 2, 0], 24, NonPublic::Documentation),
    ([192, 88, 99, 0], 24, NonPublic::Reserved),
    ([192, 168, 0, 0], 16, NonPublic::Private),
    ([198, 18, 0, 0], 15, NonPublic::Benchmarking),
    ([198, 51, 100, 0], 24, NonPublic::Documentation),
    ([203, 0, 113, 0], 24, NonPublic::Documentation),
    ([224, 0, 0, 0], 4, NonPublic::Multicast),
    ([240, 0, 0, 0], 4, NonPublic::Reserved),
];

/// IPv6 special-purpose ranges that carry no IPv4 address, most specific first.
const V6: &[(u128, u8, NonPublic)] = &[
    (0, 128, NonPublic::Unspecified),
    (1, 128, NonPublic::Loopback),
    // IPv4-compatible (deprecated): `::a.b.c.d`.
    (0, 96, NonPublic::Reserved),
    (0x0064_ff9b_0001 << 80, 48, NonPublic::Reserved),
    (0x0100 << 112, 64, NonPublic::Reserved),
    (0x2001_0db8 << 96, 32, NonPublic::Documentation),
    (0x2001 << 112, 23, NonPublic::Reserved),
    (0x3fff << 112, 20, NonPublic::Documentation),
    (0x5f00 << 112, 16, NonPublic::Reserved),
    (0xfc00 << 112, 7, NonPublic::Private),
    (0xfe80 << 112, 10, NonPublic::LinkLocal),
    (0xfec0 << 112, 10, NonPublic::Reserved),
    (0xff00 << 112, 8, NonPublic::Multicast),
];

fn in_v4(ip: u32, (network, len): (u32, u8)) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    ip & mask == network & mask
}

fn in_v6(ip: u128, (network, len): (u128, u8)) -> bool {
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
    ip & mask == network & mask
}

/// Why `ip` is not a public unicast address, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<NonPublic> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<NonPublic> {
    let bits = u32::from(ip);
    V4.iter().find(|(net, len, _)| in_v4(bits, (u32::from_be_bytes(*net), *len))).map(|(.., class)| *class)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<NonPublic> {
    let bits = u128::from(ip);
    // Forms that reach an IPv4 address are as public as that address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4);
    }
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if in_v6(bits, (0x0064_ff9b << 96, 96)) {
        return non_public_v4(low32);
    }
    if in_v6(bits, (0x2002 << 112, 16)) {
        return non_public_v4(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    if let Some((.., class)) = V6.iter().find(|(net, len, _)| in_v6(bits, (*net, *len))) {
        return Some(*class);
    }
    // Global unicast is 2000::/3; the rest of the space is unassigned or special.
    (!in_v6(bits, (0x2000 << 112, 3))).then_some(NonPublic::Reserved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> Option<NonPublic> {
        non_public(text.parse().expect("an address"))
    }

    #[test]
    fn ipv4_special_ranges_are_refused_and_public_addresses_pass() {
        use NonPublic::*;
        let cases = [
            ("0.0.0.0", Some(Unspecified)),
            ("0.1.2.3", Some(Unspecified)),
            ("127.0.0.1", Some(Loopback)),
            ("127.255.255.254", Some(Loopback)),
            ("10.1.2.3", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("192.168.1.1", Some(Private)),
            ("100.64.0.1", Some(SharedAddressSpace)),
            ("100.127.255.255", Some(SharedAddressSpace)),
            ("169.254.169.254", Some(LinkLocal)),
            ("224.0.0.1", Some(Multicast)),
            ("239.255.255.250", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("240.0.0.1", Some(Reserved)),
            ("192.0.0.8", Some(Reserved)),
            ("192.0.2.10", Some(Documentation)),
            ("198.51.100.7", Some(Documentation)),
            ("203.0.113.9", Some(Documentation)),
            ("198.18.0.1", Some(Benchmarking)),
            ("198.19.255.255", Some(Benchmarking)),
            // Just outside the ranges: public.
            ("8.8.8.8", None),
            ("1.1.1.1", None),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("169.253.255.255", None),
            ("198.17.255.255", None),
            ("198.20.0.0", None),
            ("223.255.255.255", None),
        ];
        for (text, want) in cases {
            assert_eq!(class(text), want, "{text}");
        }
    }

    #[test]
    fn ipv6_special_ranges_are_refused_and_global_unicast_passes() {
        use NonPublic::*;
        let cases = [
            ("::", Some(Unspecified)),
            ("::1", Some(Loopback)),
            ("fc00::1", Some(Private)),
            ("fd12:3456::1", Some(Private)),
            ("fe80::1", Some(LinkLocal)),
            ("febf::1", Some(LinkLocal)),
            ("fec0::1", Some(Reserved)),
            ("ff02::1", Some(Multicast)),
            ("2001:db8::1", Some(Documentation)),
            ("3fff::1", Some(Documentation)),
            ("2001::1", Some(Reserved)),
            ("100::1", Some(Reserved)),
            ("64:ff9b:1::1", Some(Reserved)),
            ("5f00::1", Some(Reserved)),
            ("::8.8.8.8", Some(Reserved)),
            ("4000::1", Some(Reserved)),
            ("2606:4700:4700::1111", None),
            ("2a00:1450:4001::1", None),
            ("2001:200::1", None),
        ];
        for (text, want) in cases {
            assert_eq!(class(text), want, "{text}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_judged_by_the_ipv4_address() {
        use NonPublic::*;
        let cases = [
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:10.0.0.1", Some(Private)),
            ("::ffff:169.254.169.254", Some(LinkLocal)),
            ("::ffff:100.64.1.1", Some(SharedAddressSpace)),
            ("::ffff:0.0.0.0", Some(Unspecified)),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::127.0.0.1", Some(Loopback)),
            ("64:ff9b::192.168.0.1", Some(Private)),
            ("64:ff9b::8.8.8.8", None),
            // 6to4: 2002:AABB:CCDD:: carries AA.BB.CC.DD.
            ("2002:7f00:1::1", Some(Loopback)),
            ("2002:a9fe:a9fe::1", Some(LinkLocal)),
            ("2002:0808:0808::1", None),
        ];
        for (text, want) in cases {
            assert_eq!(class(text), want, "{text}");
        }
    }
}
