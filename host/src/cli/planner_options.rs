//! `--planner-options`: the options JSON each selected planner receives.

use std::borrow::Cow;
use std::collections::BTreeMap;

use abi_stable::std_types::RString;
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

    /// `request` as planner `name` receives it: itself when it already carries that
    /// planner's options, else a copy with them (a cost paid only with per-planner options).
    pub fn request_for<'r>(&self, request: &'r PlanRequest, name: &str) -> Cow<'r, PlanRequest> {
        if request.options.as_str() == self.for_planner(name) {
            Cow::Borrowed(request)
        } else {
            let mut copy = request.clone();
            self.set_for(&mut copy, name);
            Cow::Owned(copy)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planner_with_its_own_options_gets_a_copy_and_the_others_the_request() {
        let named = BTreeMap::from([("exact".to_string(), r#"{"goal":"fit"}"#.to_string())]);
        let options = PlannerOptionsByName::new(Some(r#"{"time_limit_s":1}"#.into()), named);
        let mut request = PlanRequest {
            tensors: Default::default(),
            memories: Default::default(),
            num_steps: 0,
            options: RString::new(),
        };
        options.set_for(&mut request, "greedy-bestfit");
        assert_eq!(request.options.as_str(), r#"{"time_limit_s":1}"#);
        let shared = options.request_for(&request, "portfolio");
        assert!(matches!(shared, Cow::Borrowed(_)));
        let own = options.request_for(&request, "exact");
        assert!(matches!(own, Cow::Owned(_)));
        assert_eq!(own.options.as_str(), r#"{"goal":"fit"}"#);
        assert_eq!(request.options.as_str(), r#"{"time_limit_s":1}"#);
    }
}
