//! Planner options: the JSON object a user passes with `--planner-options`.
//!
//! Every planner reads its options through [`PlannerOptions`], so that the messages for
//! unknown options and bad values look the same everywhere and name the accepted values.

use serde_json::{Map, Value};

use memplan_plugin_api::{PlanError, PlanErrorKind};

/// The options object of one planner call, consumed key by key.
#[derive(Debug)]
pub struct PlannerOptions {
    planner: &'static str,
    remaining: Map<String, Value>,
}

impl PlannerOptions {
    /// Parses `json` (the request's `options`) for `planner`. An empty string counts as `{}`.
    pub fn parse(planner: &'static str, json: &str) -> Result<PlannerOptions, PlanError> {
        let json = json.trim();
        if json.is_empty() {
            return Ok(PlannerOptions {
                planner,
                remaining: Map::new(),
            });
        }
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(remaining)) => Ok(PlannerOptions { planner, remaining }),
            Ok(_) => Err(invalid(format!(
                "planner `{planner}`: --planner-options must be a JSON object, got `{json}`"
            ))),
            Err(error) => Err(invalid(format!(
                "planner `{planner}`: --planner-options is not valid JSON ({error})"
            ))),
        }
    }

    /// Takes option `key`, whose value must be one of the `choices` names; `None` when the
    /// option was not given.
    pub fn take_choice<T: Copy>(
        &mut self,
        key: &str,
        choices: &[(&'static str, T)],
    ) -> Result<Option<T>, PlanError> {
        let Some(value) = self.remaining.remove(key) else {
            return Ok(None);
        };
        let names: Vec<String> = choices
            .iter()
            .map(|(name, _)| format!("`{name}`"))
            .collect();
        let accepted = names.join(", ");
        match value.as_str() {
            Some(text) => match choices.iter().find(|(name, _)| *name == text) {
                Some(&(_, choice)) => Ok(Some(choice)),
                None => Err(invalid(format!(
                    "planner `{}`: option `{key}` has no value `{text}`; accepted: {accepted}",
                    self.planner
                ))),
            },
            None => Err(invalid(format!(
                "planner `{}`: option `{key}` must be a string, got `{value}`; accepted: {accepted}",
                self.planner
            ))),
        }
    }

    /// Takes option `key`, a number of seconds (finite, `>= 0`, below 10^9); `None` when the
    /// option was not given.
    pub fn take_seconds(&mut self, key: &str) -> Result<Option<std::time::Duration>, PlanError> {
        let Some(value) = self.remaining.remove(key) else {
            return Ok(None);
        };
        match value.as_f64() {
            Some(seconds) if seconds.is_finite() && (0.0..1e9).contains(&seconds) => {
                Ok(Some(std::time::Duration::from_secs_f64(seconds)))
            }
            _ => Err(invalid(format!(
                "planner `{}`: option `{key}` must be a number of seconds >= 0, got {value}",
                self.planner
            ))),
        }
    }

    /// Takes option `key`, `true` or `false`; `None` when the option was not given.
    pub fn take_bool(&mut self, key: &str) -> Result<Option<bool>, PlanError> {
        let Some(value) = self.remaining.remove(key) else {
            return Ok(None);
        };
        match value.as_bool() {
            Some(flag) => Ok(Some(flag)),
            None => Err(invalid(format!(
                "planner `{}`: option `{key}` must be true or false, got {value}",
                self.planner
            ))),
        }
    }

    /// Fails when options other than those already taken remain, naming them and the
    /// `accepted` option names.
    pub fn finish(self, accepted: &[&str]) -> Result<(), PlanError> {
        if self.remaining.is_empty() {
            return Ok(());
        }
        let unknown: Vec<String> = self.remaining.keys().map(|k| format!("`{k}`")).collect();
        let accepted = if accepted.is_empty() {
            "it takes no options".to_string()
        } else {
            let names: Vec<String> = accepted.iter().map(|k| format!("`{k}`")).collect();
            format!("accepted: {}", names.join(", "))
        };
        Err(invalid(format!(
            "planner `{}`: unknown option {}; {accepted}",
            self.planner,
            unknown.join(", ")
        )))
    }
}

fn invalid(message: String) -> PlanError {
    PlanError::new(PlanErrorKind::InvalidRequest, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLOURS: [(&str, u8); 2] = [("red", 1), ("blue", 2)];

    #[test]
    fn known_choices_are_taken_and_absent_ones_are_none() {
        let mut options = PlannerOptions::parse("p", r#"{"colour":"blue"}"#).unwrap();
        assert_eq!(options.take_choice("colour", &COLOURS).unwrap(), Some(2));
        assert_eq!(options.take_choice("shade", &COLOURS).unwrap(), None);
        options.finish(&["colour", "shade"]).unwrap();
        PlannerOptions::parse("p", "").unwrap().finish(&[]).unwrap();
    }

    #[test]
    fn bad_values_name_the_option_and_the_accepted_values() {
        let mut options = PlannerOptions::parse("p", r#"{"colour":"green"}"#).unwrap();
        let error = options.take_choice("colour", &COLOURS).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::InvalidRequest);
        assert!(error.message.contains("`colour`"), "{}", error.message);
        assert!(error.message.contains("`red`, `blue`"), "{}", error.message);

        let mut options = PlannerOptions::parse("p", r#"{"colour":3}"#).unwrap();
        let error = options.take_choice("colour", &COLOURS).unwrap_err();
        assert!(
            error.message.contains("must be a string"),
            "{}",
            error.message
        );
    }

    #[test]
    fn unknown_options_and_non_objects_are_rejected() {
        let options = PlannerOptions::parse("p", r#"{"speed":1}"#).unwrap();
        let error = options.finish(&["colour"]).unwrap_err();
        assert!(error.message.contains("`speed`"), "{}", error.message);
        assert!(error.message.contains("`colour`"), "{}", error.message);
        assert!(PlannerOptions::parse("p", "[1]").is_err());
        assert!(PlannerOptions::parse("p", "{").is_err());
    }

    #[test]
    fn flags_are_booleans() {
        let mut options =
            PlannerOptions::parse("p", r#"{"on": true, "off": false, "no": 0}"#).unwrap();
        assert_eq!(options.take_bool("on").unwrap(), Some(true));
        assert_eq!(options.take_bool("off").unwrap(), Some(false));
        assert_eq!(options.take_bool("absent").unwrap(), None);
        let error = options.take_bool("no").unwrap_err();
        assert!(
            error.message.contains("`no` must be true or false"),
            "{}",
            error.message
        );
    }

    #[test]
    fn seconds_are_non_negative_finite_numbers() {
        let mut options = PlannerOptions::parse("p", r#"{"t": 2.5, "u": -1, "v": "3"}"#).unwrap();
        assert_eq!(
            options.take_seconds("t").unwrap(),
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(options.take_seconds("absent").unwrap(), None);
        for key in ["u", "v"] {
            let error = options.take_seconds(key).unwrap_err();
            assert!(
                error.message.contains(&format!("`{key}`")),
                "{}",
                error.message
            );
        }
    }
}
