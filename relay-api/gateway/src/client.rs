//! A client as the gateway's limits count it: an IPv4 address, or an IPv6 /64 (what one
//! subscriber is usually given; an IPv4-mapped address counts as its IPv4 address).

use std::net::{IpAddr, Ipv6Addr};

/// A client as the limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Client(IpAddr);

impl Client {
    /// The client of a peer address: the IPv4 address, or the IPv6 /64.
    pub(super) fn of(ip: IpAddr) -> Client {
        match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                Client(IpAddr::V6(Ipv6Addr::from(prefix)))
            }
            v4 => Client(v4),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Client;

    fn client(ip: &str) -> Client {
        Client::of(ip.parse().expect("an address"))
    }

    #[test]
    fn clients_are_ipv4_addresses_and_ipv6_prefixes() {
        assert_eq!(client("2001:db8:1:2:aaaa::1"), client("2001:db8:1:2:bbbb::2"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(client("::ffff:192.0.2.7"), client("192.0.2.7"));
        assert_ne!(client("192.0.2.7"), client("192.0.2.8"));
    }
}
