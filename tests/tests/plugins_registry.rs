//! The registry's run path through the library API, with real plugin files loaded into this
//! test process: the workspace's `linear` and the fixture plugins. (The `plan` command runs the
//! same path once a model can be read; see plugins.rs.)

use memplan::registry::Registry;
use memplan::runner::{Isolation, RunLimits};
use memplan::ErrorKind;
use memplan_planner_kit::testing::{memory, tensor};
use memplan_plugin_api::abi_stable::std_types::{RString, RVec};
use memplan_plugin_api::{ArenaRole, PlanRequest, TensorKind};
use memplan_tests::{fixture_plugin, library_file_name, plugin_dir, plugin_dir_with};

/// Two 64-byte scratch tensors, live at steps 0 and 0..=1, in one SRAM.
fn request() -> PlanRequest {
    PlanRequest {
        tensors: RVec::from(vec![
            tensor("a", TensorKind::Input, 64, 0, 0),
            tensor("b", TensorKind::Output, 64, 0, 1),
        ]),
        memories: RVec::from(vec![memory("SRAM", Some(1 << 20), true, Some(0))]),
        num_steps: 2,
        options: RString::from("{}"),
    }
}

#[test]
fn linear_runs_through_the_registry() {
    let registry = Registry::scan(vec![plugin_dir().canonicalize().unwrap()]);
    let linear = registry.find("linear").expect("linear is found");
    assert!(linear
        .file
        .path
        .ends_with(library_file_name("memplan_planner_linear")));
    let plan = linear
        .run(&request(), &RunLimits::default())
        .expect("linear plans");
    assert_eq!(plan.allocations.len(), 2);
    assert_eq!(plan.arenas.len(), 1);
    assert_eq!(plan.arenas[0].role, ArenaRole::Scratch);
    // Both tensors live at step 0, so their slots must not overlap.
    let (a, b) = (plan.allocations[0], plan.allocations[1]);
    assert!(
        a.offset + 64 <= b.offset || b.offset + 64 <= a.offset,
        "{plan:?}"
    );
    assert!(plan.arenas[0].size >= 128);
}

#[test]
fn an_out_of_tree_planner_runs_by_name() {
    let library = fixture_plugin("vendor");
    let dir = plugin_dir_with("registry-vendor", &[(&library, &library_file_name("acme"))]);
    let registry = Registry::scan(vec![dir.canonicalize().unwrap()]);
    let plan = registry
        .plan(
            "fixture-vendor",
            &request(),
            &RunLimits::default(),
            Isolation::Never,
        )
        .expect("the fixture plans");
    assert!(
        plan.summary
            .contains("first fit in order of lifetime start"),
        "{}",
        plan.summary
    );
    assert_eq!(plan.allocations[1].offset, 64);
}

#[test]
fn a_panic_in_a_plugin_is_exit_4_and_the_host_goes_on() {
    let library = fixture_plugin("misbehaving");
    let dir = plugin_dir_with("registry-panics", &[(&library, &library_file_name("boom"))]);
    let registry = Registry::scan(vec![
        dir.canonicalize().unwrap(),
        plugin_dir().canonicalize().unwrap(),
    ]);
    let error = registry
        .plan(
            "fixture-panics",
            &request(),
            &RunLimits::default(),
            Isolation::Never,
        )
        .expect_err("the planner panics");
    assert_eq!(error.kind, ErrorKind::Plugin);
    assert!(
        error.message.contains("`fixture-panics`"),
        "{}",
        error.message
    );
    assert!(
        error
            .message
            .contains("fixture planner gave up on purpose (2 tensors)"),
        "{}",
        error.message
    );
    // Still alive, and other planners still work.
    registry
        .plan(
            "linear",
            &request(),
            &RunLimits::default(),
            Isolation::Never,
        )
        .expect("linear still plans after a panic elsewhere");
}
