//! Keeps the plugin ABI version apart from this crate's version.
//!
//! abi_stable records, in the layout of every `StableAbi` type, the package name and
//! `CARGO_PKG_VERSION` of the crate that defines it, and refuses to load a plugin whose types
//! carry another major version. That would tie the ABI to this crate's version, which follows
//! semver for its Rust API (2.0.0 moved the planner kit out: a breaking change for source, none
//! for the ABI). So the crate is compiled with `CARGO_PKG_VERSION` set to the ABI version:
//! abi_stable then compares ABI versions, and a plugin built against any release of this crate
//! with ABI 1.x loads in any host with ABI 1.x. `ABI_VERSION` (src/export.rs) is the same
//! value, and a unit test checks what abi_stable records.

/// The plugin ABI version: a new major on any layout change of a type that crosses the
/// boundary (docs/writing-a-planner.md).
const ABI_VERSION: &str = "1.0.0";

fn main() {
    println!("cargo:rustc-env=MEMPLAN_ABI_VERSION={ABI_VERSION}");
    println!("cargo:rustc-env=CARGO_PKG_VERSION={ABI_VERSION}");
    // The crate's own version, for the test that tells the two apart.
    println!(
        "cargo:rustc-env=MEMPLAN_PLUGIN_API_CRATE_VERSION={}",
        std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION")
    );
}
