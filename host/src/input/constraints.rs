//! Memory constraints: narrow a target memory's budget and raise its arena alignment.
//!
//! Given as `--memory NAME=BYTES` (BYTES may end in `K` or `M`, binary) or `--memory FILE`
//! with a JSON list of `{name, max_size, arena_alignment}` (heliaAOT's shape). Later entries
//! win over earlier ones for the same memory.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::model::alignment_problem;
use crate::input::source::{parse_json, read_text, MAX_SETTINGS_FILE_BYTES};
use crate::input::target::Target;

/// One constraint, before it is checked against a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryConstraint {
    /// Memory name as the user wrote it.
    pub memory: String,
    pub max_size: Option<u64>,
    pub arena_alignment: Option<u64>,
    /// Where it came from, for messages (`--memory SRAM=64K`, `limits.json: entry 2`).
    pub origin: String,
}

/// Every constraint the user gave, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Constraints {
    pub entries: Vec<MemoryConstraint>,
}

/// What the constraints leave of each target memory, by memory index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Bytes all arenas in the memory may take: the constraint, else the capacity.
    pub budget: Option<u64>,
    /// Arena alignment the user asked for (a power of two), if any.
    pub arena_alignment: Option<u64>,
}

impl Constraints {
    /// Reads a constraints JSON file: a list of `{name, max_size, arena_alignment}`.
    pub fn read(path: &Path) -> Result<Constraints> {
        let text = read_text(
            path,
            "a memory constraints JSON (or write --memory NAME=BYTES)",
            MAX_SETTINGS_FILE_BYTES,
        )?;
        let docs: Vec<ConstraintDoc> = parse_json(
            path,
            &text,
            "a memory constraints JSON: [{\"name\": \"SRAM\", \"max_size\": 65536, \"arena_alignment\": 16}]",
        )?;
        Ok(Constraints {
            entries: docs
                .into_iter()
                .enumerate()
                .map(|(index, doc)| MemoryConstraint {
                    memory: doc.name,
                    max_size: doc.max_size,
                    arena_alignment: doc.arena_alignment,
                    origin: format!("{}: entry {index}", path.display()),
                })
                .collect(),
        })
    }

    /// Checks every constraint against `target` and returns the limit of each of its memories.
    /// Unknown memories, alignments that are not powers of two and budgets above a memory's
    /// capacity are input errors.
    pub fn apply(&self, target: &Target) -> Result<Vec<MemoryLimit>> {
        let mut limits: Vec<MemoryLimit> = target
            .memories
            .iter()
            .map(|m| MemoryLimit {
                budget: m.capacity,
                arena_alignment: None,
            })
            .collect();
        for constraint in &self.entries {
            let origin = &constraint.origin;
            let index = target.memory_index(&constraint.memory).ok_or_else(|| {
                Error::input(format!(
                    "{origin}: target {} has no memory `{}`; its memories are {}",
                    target.name,
                    constraint.memory,
                    target.memory_names()
                ))
            })?;
            let memory = &target.memories[index];
            if let Some(max_size) = constraint.max_size {
                if let Some(capacity) = memory.capacity.filter(|&c| max_size > c) {
                    return Err(Error::input(format!(
                        "{origin}: {} bytes exceed the {capacity} bytes {} has on target {}; give at most {capacity}",
                        max_size, memory.name, target.name
                    )));
                }
                limits[index].budget = Some(max_size);
            }
            if let Some(alignment) = constraint.arena_alignment {
                if let Some(problem) = alignment_problem(alignment) {
                    return Err(Error::input(format!(
                        "{origin}: arena_alignment of {}: {problem}",
                        memory.name
                    )));
                }
                limits[index].arena_alignment = Some(alignment);
            }
        }
        Ok(limits)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConstraintDoc {
    name: String,
    #[serde(default)]
    max_size: Option<u64>,
    #[serde(default)]
    arena_alignment: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn memory_flags_narrow_budgets_later_wins() {
        let target = Target::preset("apollo3_evb").unwrap();
        let constraints =
            crate::cli::parse::memory_constraints(&args(&["sram=64K", "DTCM=1000", "DTCM=2000"]))
                .unwrap();
        let limits = constraints.apply(&target).unwrap();
        assert_eq!(limits[0].budget, Some(2000));
        assert_eq!(limits[1].budget, Some(65_536));
        assert_eq!(limits[2].budget, Some(1_048_576));
    }

    #[test]
    fn constraint_errors_name_the_flag_and_what_to_fix() {
        let target = Target::preset("apollo3_evb").unwrap();
        let error = crate::cli::parse::memory_constraints(&args(&["PSRAM=1"]))
            .unwrap()
            .apply(&target)
            .unwrap_err();
        assert!(
            error.message.contains("--memory PSRAM=1"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("DTCM, SRAM, MRAM"),
            "{}",
            error.message
        );
        let error = crate::cli::parse::memory_constraints(&args(&["DTCM=65537"]))
            .unwrap()
            .apply(&target)
            .unwrap_err();
        assert!(error.message.contains("at most 65536"), "{}", error.message);
        let error = crate::cli::parse::memory_constraints(&args(&["DTCM=lots"])).unwrap_err();
        assert!(
            error.message.contains("not a byte count"),
            "{}",
            error.message
        );
        assert_eq!(error.kind, crate::ErrorKind::Input);
    }

    #[test]
    fn constraints_file_sets_alignment_and_rejects_non_powers_of_two() {
        let dir = std::env::temp_dir().join(format!("memplan-constraints-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.json");
        std::fs::write(
            &good,
            r#"[{"name":"SRAM","max_size":4096,"arena_alignment":64}]"#,
        )
        .unwrap();
        let limits = crate::cli::parse::memory_constraints(&[good.display().to_string()])
            .unwrap()
            .apply(&Target::generic())
            .unwrap();
        assert_eq!(
            limits[0],
            MemoryLimit {
                budget: Some(4096),
                arena_alignment: Some(64)
            }
        );
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"[{"name":"SRAM","arena_alignment":48}]"#).unwrap();
        let error = Constraints::read(&bad)
            .unwrap()
            .apply(&Target::generic())
            .unwrap_err();
        assert!(error.message.contains("entry 0"), "{}", error.message);
        assert!(error.message.contains("power of two"), "{}", error.message);
    }
}
