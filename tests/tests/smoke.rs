//! The binary builds, starts and answers --help and bad usage as DESIGN.md says.

use memplan_tests::{describe, run_memplan};

#[test]
fn help_exits_zero() {
    let output = run_memplan(["--help"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("plan"));
}

#[test]
fn unknown_flag_is_bad_usage() {
    let output = run_memplan(["plan", "--no-such-flag"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
}
