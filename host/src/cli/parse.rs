//! Every command-line string memplan parses, in one place: planner lists, planner options,
//! `--timeout`, `--plugin-sha256` pins and `--memory` budgets. Each turns a value into the type
//! the stage that uses it takes, or into a usage error (exit 2) that quotes the value and shows
//! the expected form. [`super::config::resolve`] calls them all before any work starts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::cli::planner_options::PlannerOptionsByName;
use crate::error::{Error, Result};
use crate::input::{Constraints, MemoryConstraint};
use crate::registry::trust::parse_sha256;

/// The planner names of a `--planner` value: comma-separated, trimmed, non-empty, distinct.
pub fn planner_list(spec: &str) -> Result<Vec<String>> {
    let names: Vec<String> = spec
        .split(',')
        .map(|name| name.trim().to_string())
        .collect();
    if names.iter().any(String::is_empty) {
        return Err(Error::input(format!(
            "--planner `{spec}`: empty planner name; give names separated by commas, e.g. \
             --planner greedy-bestfit,linear"
        )));
    }
    let mut seen = BTreeSet::new();
    if let Some(repeated) = names.iter().find(|name| !seen.insert(name.as_str())) {
        return Err(Error::input(format!(
            "--planner `{spec}`: planner `{repeated}` is listed twice"
        )));
    }
    Ok(names)
}

/// The `--planner-options` values for the `selected` planners: a bare JSON object applies to
/// every planner, `NAME=JSON` to planner NAME only. Usage errors (exit
/// 2): a value that is neither a JSON object nor `NAME=JSON object`, a NAME that is not
/// selected, a planner or the bare form given twice.
pub fn planner_options(values: &[String], selected: &[String]) -> Result<PlannerOptionsByName> {
    let mut common: Option<String> = None;
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for value in values {
        let trimmed = value.trim_start();
        if trimmed.starts_with('{') {
            check_json_object(value, value)?;
            if common.replace(value.clone()).is_some() {
                return Err(Error::input(
                    "--planner-options: a bare JSON object (for every planner) is given \
                     twice; give it once, and NAME=JSON for options of one planner"
                        .to_string(),
                ));
            }
            continue;
        }
        let Some((name, json)) = value.split_once('=') else {
            return Err(Error::input(format!(
                "--planner-options `{value}`: expected a JSON object such as \
                 '{{\"fit\":\"first\"}}' (for every planner) or NAME=JSON such as \
                 'greedy-bestfit={{\"fit\":\"first\"}}'"
            )));
        };
        let name = name.trim();
        if !selected.iter().any(|selected| selected == name) {
            return Err(Error::input(format!(
                "--planner-options `{value}`: planner `{name}` is not selected (--planner \
                 {}); options can only go to a selected planner",
                selected.join(",")
            )));
        }
        check_json_object(value, json)?;
        if named.insert(name.to_string(), json.to_string()).is_some() {
            return Err(Error::input(format!(
                "--planner-options: options for planner `{name}` are given twice"
            )));
        }
    }
    Ok(PlannerOptionsByName::new(common, named))
}

/// A usage error unless `json` is a JSON object (checked here so that a typo is reported
/// before the model is read, not by each planner).
fn check_json_object(value: &str, json: &str) -> Result<()> {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(Error::input(format!(
            "--planner-options `{value}`: the options must be a JSON object, e.g. '{{\"fit\":\"first\"}}'"
        ))),
        Err(error) => Err(Error::input(format!(
            "--planner-options `{value}`: not valid JSON ({error})"
        ))),
    }
}

/// The `--timeout SECONDS` argument; a negative or non-finite value is a usage error (exit 2).
pub fn timeout(seconds: Option<f64>) -> Result<Option<Duration>> {
    Ok(match seconds {
        None => None,
        Some(seconds) => Some(Duration::try_from_secs_f64(seconds).map_err(|_| {
            Error::input(format!(
                "--timeout {seconds}: expected a number of seconds >= 0, e.g. --timeout 30"
            ))
        })?),
    })
}

/// A `--plugin-sha256 NAME=HEX` value.
pub fn plugin_pin(arg: &str) -> Result<(String, String)> {
    let usage = |problem: &str| {
        Error::input(format!(
            "--plugin-sha256 {arg}: {problem}; expected NAME=HEX with the planner's name and \
             the 64 hex digits of its file's SHA-256 (e.g. from `sha256sum FILE`)"
        ))
    };
    let (name, hex) = arg.split_once('=').ok_or_else(|| usage("no `=`"))?;
    if name.is_empty() {
        return Err(usage("the planner name is empty"));
    }
    let sha256 = parse_sha256(hex).ok_or_else(|| usage("not a SHA-256"))?;
    Ok((name.to_string(), sha256))
}

/// The `--memory` values: `NAME=BYTES` (BYTES may end in K/KiB or M/MiB, binary), or a
/// constraints FILE (read by `Constraints::read`).
pub fn memory_constraints(values: &[String]) -> Result<Constraints> {
    let mut entries = Vec::new();
    for value in values {
        match value.split_once('=') {
            Some((name, bytes)) => {
                let origin = format!("--memory {value}");
                let max_size = parse_bytes(bytes.trim()).ok_or_else(|| {
                    Error::input(format!(
                        "{origin}: `{bytes}` is not a byte count; write NAME=BYTES, e.g. SRAM=65536 or SRAM=64K"
                    ))
                })?;
                entries.push(MemoryConstraint {
                    memory: name.trim().to_string(),
                    max_size: Some(max_size),
                    arena_alignment: None,
                    origin,
                });
            }
            None => entries.extend(Constraints::read(Path::new(value))?.entries),
        }
    }
    Ok(Constraints { entries })
}

/// The `--plan-memory-limit BYTES` value: at least 64 MiB (a worker needs some memory to
/// start its planner at all).
pub fn plan_memory_limit(text: &str) -> Result<u64> {
    const MINIMUM: u64 = 64 << 20;
    match parse_bytes(text.trim()) {
        Some(bytes) if bytes >= MINIMUM => Ok(bytes),
        Some(_) => Err(Error::input(format!(
            "--plan-memory-limit {text}: too small for a planner to run; give at least 64M"
        ))),
        None => Err(Error::input(format!(
            "--plan-memory-limit {text}: not a byte count; write e.g. 4G, 512M or 1073741824"
        ))),
    }
}

/// `65536`, `64K`, `64KiB`, `1M`, `1MiB`, `1G`, `1GiB` (binary units).
fn parse_bytes(text: &str) -> Option<u64> {
    let (digits, multiplier) =
        if let Some(d) = text.strip_suffix("GiB").or_else(|| text.strip_suffix('G')) {
            (d, 1 << 30)
        } else if let Some(d) = text
            .strip_suffix("KiB")
            .or_else(|| text.strip_suffix('K'))
            .or_else(|| text.strip_suffix('k'))
        {
            (d, 1024)
        } else if let Some(d) = text.strip_suffix("MiB").or_else(|| text.strip_suffix('M')) {
            (d, 1024 * 1024)
        } else {
            (text, 1)
        };
    digits.trim().parse::<u64>().ok()?.checked_mul(multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn planner_lists_are_split_trimmed_and_checked() {
        assert_eq!(planner_list("a, b,c").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(planner_list("a,,b").unwrap_err().kind, ErrorKind::Input);
        let error = planner_list("a,b,a").unwrap_err();
        assert!(error.message.contains("`a` is listed twice"), "{error}");
    }

    #[test]
    fn planner_options_go_to_each_planner_by_name() {
        let selected = planner_list("greedy-bestfit,linear,exact").unwrap();
        let values = [
            r#"{"time_limit_s": 1}"#.to_string(),
            r#"greedy-bestfit={"fit":"first"}"#.to_string(),
            "linear={}".to_string(),
        ];
        let options = planner_options(&values, &selected).unwrap();
        assert_eq!(options.for_planner("greedy-bestfit"), r#"{"fit":"first"}"#);
        assert_eq!(options.for_planner("linear"), "{}");
        assert_eq!(options.for_planner("exact"), r#"{"time_limit_s": 1}"#);
        assert_eq!(PlannerOptionsByName::default().for_planner("exact"), "{}");
    }

    #[test]
    fn bad_planner_options_are_usage_errors_naming_the_value() {
        let selected = planner_list("greedy-bestfit,linear").unwrap();
        for (value, named) in [
            (r#"exact={"time_limit_s":1}"#, "`exact` is not selected"),
            ("fit=first", "`fit` is not selected"),
            (r#"linear=[1]"#, "must be a JSON object"),
            (r#"linear={"#, "not valid JSON"),
            ("first", "expected a JSON object"),
        ] {
            let error = planner_options(&[value.to_string()], &selected).unwrap_err();
            assert_eq!(error.kind, ErrorKind::Input, "{value}");
            assert!(error.message.contains(named), "{value}: {}", error.message);
        }
        let twice = ["linear={}".to_string(), "linear={}".to_string()];
        let error = planner_options(&twice, &selected).unwrap_err();
        assert!(error.message.contains("twice"), "{}", error.message);
    }

    #[test]
    fn bad_timeouts_are_usage_errors() {
        for seconds in [-1.0, f64::NAN, f64::INFINITY] {
            let error = timeout(Some(seconds)).unwrap_err();
            assert_eq!(error.kind, ErrorKind::Input);
        }
        assert_eq!(
            timeout(Some(1.5)).unwrap(),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn malformed_pins_are_usage_errors() {
        for arg in [
            "linear",
            "=abc",
            "linear=abc",
            &format!("linear={}", "g".repeat(64)),
        ] {
            let error = plugin_pin(arg).unwrap_err();
            assert_eq!(error.kind, ErrorKind::Input, "{arg}");
            assert!(error.message.contains("NAME=HEX"), "{}", error.message);
        }
        let hex = "AB".repeat(32);
        assert_eq!(
            plugin_pin(&format!("linear={hex}")).unwrap(),
            ("linear".to_string(), hex.to_ascii_lowercase())
        );
    }

    #[test]
    fn byte_counts_take_binary_suffixes() {
        let constraints =
            memory_constraints(&["SRAM=64K".to_string(), "DTCM=1MiB".to_string()]).unwrap();
        let sizes: Vec<_> = constraints
            .entries
            .iter()
            .map(|entry| entry.max_size)
            .collect();
        assert_eq!(sizes, [Some(65536), Some(1 << 20)]);
        assert!(parse_bytes("1MiB") == Some(1 << 20) && parse_bytes("-1").is_none());
        let error = memory_constraints(&["SRAM=lots".to_string()]).unwrap_err();
        assert!(
            error.message.contains("not a byte count"),
            "{}",
            error.message
        );
    }
}
