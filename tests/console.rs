//! The web consoles in a real browser: Debian's Chromium over WebDriver (`console/webdriver.rs`),
//! against the real `svc` binary serving on loopback. One binary, a module per console.

mod console {
    mod publication;
    pub(crate) mod webdriver;
}
