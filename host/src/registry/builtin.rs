//! The planners built into memplan: the shipped planner crates, linked in as `rlib`s.
//!
//! Each crate defines its root module with `memplan_plugin_api::planner_root_module!`, the
//! module its plugin file (`plugins/*/cdylib`) exports; the host reads its [`PlannerEntry`]s
//! and runs them through the same path as a loaded plugin's ([`crate::runner`]), so memplan's
//! planners and a vendor's meet the host the same way. Being part of this binary is what makes
//! a planner memplan's own (trusted, run in process by `--isolate=auto`); where a file lies
//! never does.

use std::time::Duration;

use memplan_plugin_api::{PlannerEntry, PluginModuleRef};

/// The root modules linked in, in registration order.
fn modules() -> [PluginModuleRef; 3] {
    [
        memplan_planner_greedy_bestfit::memplan_root_module(),
        memplan_planner_exact::memplan_root_module(),
        memplan_planner_linear::memplan_root_module(),
    ]
}

/// Every built-in planner's entry.
pub fn entries() -> Vec<PlannerEntry> {
    modules()
        .iter()
        .flat_map(|module| module.planners().as_slice().iter().copied())
        .collect()
}

/// The time a built-in planner gives itself when its options name none (its `time_limit_s`
/// default), `None` for the planners that run once through and have no limit of their own.
pub fn default_time_limit(name: &str) -> Option<Duration> {
    match name {
        "exact" => Some(memplan_planner_exact::DEFAULT_TIME_LIMIT),
        "portfolio" => Some(memplan_planner_exact::portfolio::DEFAULT_TIME_LIMIT),
        _ => None,
    }
}

/// The names of the built-in planners, in registration order.
pub fn names() -> Vec<&'static str> {
    entries().iter().map(|entry| entry.name.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_planners_are_built_in_once_each() {
        let mut names = names();
        assert_eq!(names, ["greedy-bestfit", "exact", "portfolio", "linear"]);
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 4);
        for entry in entries() {
            assert!(super::super::is_valid_planner_name(entry.name.as_str()));
            assert!(!entry.version.as_str().is_empty());
        }
    }

    #[test]
    fn the_searching_planners_have_their_documented_default_limits() {
        // The descriptions `memplan planners` prints state the same defaults.
        for (name, seconds) in [("exact", 10), ("portfolio", 1)] {
            assert_eq!(default_time_limit(name), Some(Duration::from_secs(seconds)));
            let entry = entries()
                .into_iter()
                .find(|entry| entry.name.as_str() == name)
                .unwrap();
            let description = entry.description.as_str();
            assert!(
                description.contains(&format!("default {seconds}")),
                "{description}"
            );
        }
        assert_eq!(default_time_limit("greedy-bestfit"), None);
    }
}
