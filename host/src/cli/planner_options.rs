//! `--planner-options`: the options JSON each selected planner receives.

use std::collections::BTreeMap;

use memplan_plugin_api::abi_stable::std_types::RString;
use memplan_plugin_api::PlanRequest;

/// `--planner-options`, per planner: a bare JSON object applies to every selected planner;
/// `NAME=JSON` (repeatable) gives planner NAME its own object instead, so that
/// `--planner a,b` can pass each planner options the other would refuse.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlannerOptionsByName {
    common: Option<String>,
    named: BTreeMap<String, String>,
}

impl PlannerOptionsByName {
    /// Options for every planner (`common`, the bare JSON form) and per planner (`named`);
    /// the command line's `--planner-options` values are parsed into these by the `cli`.
    pub fn new(common: Option<String>, named: BTreeMap<String, String>) -> PlannerOptionsByName {
        PlannerOptionsByName { common, named }
    }

    /// Sets `request.options` to planner `name`'s options.
    pub fn set_for(&self, request: &mut PlanRequest, name: &str) {
        request.options = RString::from(self.for_planner(name));
    }

    /// The options JSON planner `name` receives: its own, else the common object, else `{}`.
    pub fn for_planner(&self, name: &str) -> &str {
        self.named
            .get(name)
            .or(self.common.as_ref())
            .map_or("{}", String::as_str)
    }
}
