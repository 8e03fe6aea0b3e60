//! The manifests shipped in `examples/` are valid: the README's first command validates one.

use svc_e2e::workspace;

#[test]
fn bundled_example_manifests_are_valid() {
    for name in ["manifest.yaml", "manifest.v4.json"] {
        let bytes = std::fs::read(workspace().join("examples/node-demo").join(name)).expect("example manifest");
        let report = manifest_core::validate(&bytes);
        assert!(report.is_valid(), "{name}: {:?}", report.diagnostics);
        assert!(report.diagnostics.is_empty(), "{name} should not even warn: {:?}", report.diagnostics);
    }
}
