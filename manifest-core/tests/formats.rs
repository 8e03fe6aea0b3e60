//! Each string format is written twice: as code (what validation runs) and as a regular
//! expression (what the JSON Schema says). This checks they agree on many strings: seeds
//! near each format's edges, and mutations of them.

use manifest_core::formats::ALL;
use manifest_core::shape::Pattern;

const SEEDS: &[&str] = &[
    "",
    "a",
    "0",
    "00",
    "01",
    "10",
    "a-b",
    "-a",
    "a.",
    "A",
    "ab",
    "AB",
    "a_b",
    "a b",
    "a/b",
    "a//b",
    "/a",
    "a/",
    "./a",
    "../a",
    "a/../b",
    "...",
    "..a",
    ".a",
    "a\\b",
    "refs/heads/main",
    "refs/",
    "refs/ x",
    "acme/shop",
    "acme/shop/.github/workflows/b.yml@refs/heads/main",
    "a/b/c@d",
    "a/b@c",
    "a/b/c@d@e",
    "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
    "ipfs://QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
    "ipfs://Qm0wAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
    "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
    "sha256:2C26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
    "1500000000",
    "1000000",
    "9999999999999999999999999",
    "99999999999999999999999999",
    "DE",
    "de",
    "D",
    "DEU",
    "svc-regions.v1",
    "svc.v",
    ".v1",
    "LOG_LEVEL",
    "_X",
    "9X",
    "log_level",
    "db.password",
    "a..b",
    "20",
    "20.11",
    "20.11.1",
    "20.11.1.1",
    "20.",
    ".20",
    "0s",
    "1ms",
    "30d",
    "05m",
    "10",
    "1h",
    "1.5h",
    "10M",
    "512MiB",
    "0B",
    "512mib",
    "1TB",
    "01GB",
    "2028-02-29T23:59:59Z",
    "2027-02-29T00:00:00Z",
    "2027-02-30T00:00:00Z",
    "2027-13-01T00:00:00Z",
    "2027-01-01T24:00:00Z",
    "2027-01-01T00:60:00Z",
    "2027-01-01T00:00:00",
    "2027-1-01T00:00:00Z",
    "/health",
    "/",
    "/run/secrets/x",
    "server.js",
    "dist/server.js",
    "a-1.b_2",
    "é",
    "a\u{0}b",
    "x\ny",
];

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALPHABET: &[char] = &[
    'a', 'z', 'A', 'Z', '0', '1', '9', '.', '_', '-', '/', '\\', '@', ':', ' ', 'T', 'Z', 'v', 'm', 's', 'h', 'd', 'B',
    'K', 'i', 'M', 'G', 'Q', 'b', '2', '7', 'f', '\n', 'é',
];

fn mutate(rng: &mut Rng, s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    for _ in 0..=rng.below(3) {
        let c = ALPHABET[rng.below(ALPHABET.len())];
        match rng.below(4) {
            0 if !chars.is_empty() => {
                let i = rng.below(chars.len());
                chars.remove(i);
            }
            1 if !chars.is_empty() => {
                let i = rng.below(chars.len());
                chars[i] = c;
            }
            2 => {
                let i = rng.below(chars.len() + 1);
                chars.insert(i, c);
            }
            _ => {
                let count = rng.below(70);
                chars.extend(std::iter::repeat_n(c, count));
            }
        }
    }
    chars.into_iter().collect()
}

fn agree(name: &str, pattern: &Pattern, regex: &regex::Regex, s: &str) -> Result<(), String> {
    let by_code = (pattern.check)(s);
    let by_regex = regex.is_match(s);
    let ok = if pattern.exact { by_code == by_regex } else { !by_code || by_regex };
    if ok {
        Ok(())
    } else {
        Err(format!("{name}: code says {by_code}, regex {} says {by_regex}, on {s:?}", pattern.regex))
    }
}

#[test]
fn every_format_regex_agrees_with_its_code() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut failures = Vec::new();
    for (name, pattern) in ALL {
        let regex = regex::Regex::new(pattern.regex).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut samples: Vec<String> = SEEDS.iter().map(|s| (*s).to_owned()).collect();
        for _ in 0..3000 {
            let seed = SEEDS[rng.below(SEEDS.len())];
            samples.push(mutate(&mut rng, seed));
        }
        failures.extend(samples.iter().filter_map(|s| agree(name, pattern, &regex, s).err()));
    }
    failures.truncate(40);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn format_regexes_avoid_syntax_outside_ecma_and_python() {
    for (name, pattern) in ALL {
        for banned in ["\\p{", "\\P{", "(?<", "(?P", "\\A", "\\Z", "\\z", "(?i", "[[:"] {
            assert!(!pattern.regex.contains(banned), "{name} uses {banned}");
        }
        assert!(pattern.regex.starts_with('^'), "{name} is anchored at the start");
    }
}
