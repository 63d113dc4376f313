//! The options of planner `exact` (`--planner-options`): the time limit, what the search is
//! after, and one switch per search technique of the scheduler ([`crate::schedule`]), so that
//! each can be turned off and its effect measured (`memplan bench` or the crate's `bench`
//! example with, say, `{"bisection": false}`).

use std::time::Duration;

use memplan_planner_kit::PlannerOptions;
use memplan_plugin_api::PlanError;

/// The planner's name, which its option messages give.
pub const NAME: &str = "exact";
/// Time a plan may take when neither the option nor the host says otherwise.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(10);

/// The planner's options (`--planner-options`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExactOptions {
    /// Search time for the whole plan (all arenas); the host's deadline still applies.
    pub time_limit: Duration,
    pub goal: Goal,
    pub techniques: Techniques,
}

/// What the search is after (option `goal`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Goal {
    /// The lowest arena, proven optimal when time allows (`"smallest"`, the default).
    #[default]
    Smallest,
    /// The first packing that fits the memory's budget (`"fit"`, MiniMalloc's question):
    /// searches aim at the budget rather than the lower bound and stop once every buffer
    /// fits. Without a budget, the same as `Smallest`.
    Fit,
}

impl Goal {
    pub const ALL: [(&'static str, Goal); 2] = [("smallest", Goal::Smallest), ("fit", Goal::Fit)];
}

/// Which search techniques the scheduler uses (each an option of the same name, `true` by
/// default; `false` turns it off). Turning techniques off never makes a packing invalid or a
/// proof wrong, only slower to come: the greedy start is always kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Techniques {
    /// `tight_searches`: persistent searches capped at the lower bound (or the budget), the
    /// decision problem where pruning is strongest; their exhaustion raises the bound.
    pub tight_searches: bool,
    /// `descents`: persistent searches capped just below the best height, lowering the cap
    /// below each packing they find.
    pub descents: bool,
    /// `mirrored`: every search also runs on the component with time reversed (the search
    /// time is very sensitive to the direction).
    pub mirrored: bool,
    /// `restarts`: short tight searches in seeded shuffled orders with Luby budgets, which
    /// cut the heavy tail of the search time.
    pub restarts: bool,
    /// `raised_restarts`: more restarts, aiming between the bound and the best height
    /// (moving their aim as bisection does) instead of at the bound: where the bound is far
    /// below the optimum (MiniMalloc's J), restarts at the bound never succeed.
    pub raised_restarts: bool,
    /// `merged_restarts`: one restart in three, and every raised restart, searches a merged
    /// instance (buffers glued where their sizes say they were cut from one piece,
    /// [`crate::merge`]).
    pub merged_restarts: bool,
    /// `band_splits`: where the component tiles every column up to the bound, it is cut
    /// into bands across its whole lifetime, each packed on its own ([`crate::bands`]).
    pub band_splits: bool,
    /// `bisection`: searches capped between the bound and the best height, where the bound
    /// is far below the optimum.
    pub bisection: bool,
}

impl Techniques {
    /// Every technique on: the default.
    pub const ALL: Techniques = Techniques {
        tight_searches: true,
        descents: true,
        mirrored: true,
        restarts: true,
        raised_restarts: true,
        merged_restarts: true,
        band_splits: true,
        bisection: true,
    };

    /// The techniques that aim at the target (the lower bound, or the budget to fit): every
    /// one but descents, bisection and raised restarts, which look for packings between the
    /// target and the best height found. A caller that keeps a packing only at the target
    /// (the portfolio's critical-step search) loses nothing without them, and its searches
    /// at the target get their time.
    pub const AT_THE_TARGET: Techniques = Techniques {
        descents: false,
        bisection: false,
        raised_restarts: false,
        ..Techniques::ALL
    };

    /// The option names, each with its switch.
    fn switches(&mut self) -> [(&'static str, &mut bool); 8] {
        [
            ("tight_searches", &mut self.tight_searches),
            ("descents", &mut self.descents),
            ("mirrored", &mut self.mirrored),
            ("restarts", &mut self.restarts),
            ("raised_restarts", &mut self.raised_restarts),
            ("merged_restarts", &mut self.merged_restarts),
            ("band_splits", &mut self.band_splits),
            ("bisection", &mut self.bisection),
        ]
    }
}

impl Default for Techniques {
    fn default() -> Techniques {
        Techniques::ALL
    }
}

impl Default for ExactOptions {
    fn default() -> ExactOptions {
        ExactOptions {
            time_limit: DEFAULT_TIME_LIMIT,
            goal: Goal::default(),
            techniques: Techniques::ALL,
        }
    }
}

impl ExactOptions {
    pub fn parse(json: &str) -> Result<ExactOptions, PlanError> {
        let mut options = PlannerOptions::parse(NAME, json)?;
        let time_limit = options.take_seconds("time_limit_s")?;
        let goal = options.take_choice("goal", &Goal::ALL)?;
        let mut techniques = Techniques::ALL;
        let mut accepted = vec!["time_limit_s", "goal"];
        for (name, switch) in techniques.switches() {
            if let Some(on) = options.take_bool(name)? {
                *switch = on;
            }
            accepted.push(name);
        }
        options.finish(&accepted)?;
        Ok(ExactOptions {
            time_limit: time_limit.unwrap_or(DEFAULT_TIME_LIMIT),
            goal: goal.unwrap_or_default(),
            techniques,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_accept_a_time_limit_and_name_unknown_options() {
        assert_eq!(
            ExactOptions::parse("{\"time_limit_s\": 2.5}")
                .expect("valid")
                .time_limit,
            Duration::from_millis(2500)
        );
        assert_eq!(
            ExactOptions::parse("").expect("empty"),
            ExactOptions::default()
        );
        let error = ExactOptions::parse("{\"time_limit\": 2}").unwrap_err();
        assert_eq!(
            error.kind,
            memplan_plugin_api::PlanErrorKind::InvalidRequest
        );
        assert!(error.message.contains("`time_limit`"), "{}", error.message);
        assert!(error.message.contains("`bisection`"), "{}", error.message);
        assert!(ExactOptions::parse("{\"time_limit_s\": -1}").is_err());
        assert_eq!(
            ExactOptions::parse("{\"goal\": \"fit\"}")
                .expect("valid")
                .goal,
            Goal::Fit
        );
        let error = ExactOptions::parse("{\"goal\": \"fastest\"}").unwrap_err();
        assert!(error.message.contains("`fit`"), "{}", error.message);
    }

    #[test]
    fn each_technique_is_turned_off_by_its_own_option() {
        let mut all = Techniques::ALL;
        let names = all.switches().map(|(name, _)| name);
        for name in names {
            let parsed = ExactOptions::parse(&format!("{{\"{name}\": false}}"))
                .expect("valid")
                .techniques;
            let mut expected = Techniques::ALL;
            for (other, switch) in expected.switches() {
                *switch = other != name;
            }
            assert_eq!(parsed, expected, "{name}");
        }
        let error = ExactOptions::parse("{\"bisection\": \"no\"}").unwrap_err();
        assert!(error.message.contains("true or false"), "{}", error.message);
    }
}
