//! Hex as the relay writes it: tickets, credentials' hashes, probe keys and a `Hello`'s
//! binding. The tunnel protocol (`wire.rs`, which hands these on under its own path, as
//! `wire::hex`) and the route key's proof (`challenge.rs`) both use it.

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads lower- or upper-case hex of exactly `N` bytes: hex digits only (`from_str_radix`
/// alone would also take a `+` sign, so `+f` would read as `0f`).
pub fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let t = [7u8; 32];
        assert_eq!(unhex::<32>(&hex(&t)), Some(t));
        assert_eq!(unhex::<32>("zz"), None);
        assert_eq!(unhex::<2>("0A0b"), Some([10, 11]));
    }

    #[test]
    fn a_signed_hex_ticket_is_refused() {
        // `u8::from_str_radix("+f", 16)` is 15: a ticket written `+f+f...` read as `0f0f...`.
        assert_eq!(unhex::<2>("+f+f"), None);
        assert_eq!(unhex::<2>("-f0f"), None);
        assert_eq!(unhex::<32>(&"+f".repeat(32)), None);
    }
}
