//! Targets: the memories of a board, built in (`generic`, Ambiq EVBs) or read from a JSON file.
//!
//! Capacities, writability, scratch order and minimum alignment of the presets come from
//! Ambiq's published heliaAOT platform table (see `facts/targets.md`).

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::model::alignment_problem;
use crate::input::source::{parse_json, read_text, MAX_SETTINGS_FILE_BYTES};

/// A board's memories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Preset name, or the file the target was read from.
    pub name: String,
    pub memories: Vec<TargetMemory>,
    /// Every slot is aligned to at least this (a power of two).
    pub min_alignment: u64,
}

/// One memory bank of a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetMemory {
    /// Uppercase name (`SRAM`, `DTCM`, ...).
    pub name: String,
    /// Bytes; `None` is unbounded.
    pub capacity: Option<u64>,
    pub writable: bool,
    /// Place in the preferred scratch order (lower first); `None` keeps scratch out unless a
    /// tensor is pinned there. Only writable memories have one.
    pub scratch_order: Option<u32>,
}

/// Names of the built-in targets, for `--help` and messages.
pub const PRESET_NAMES: [&str; 4] = ["generic", "apollo3_evb", "apollo4p_evb", "apollo510_evb"];

/// (name, capacity, writable, scratch order)
type MemoryRow = (&'static str, Option<u64>, bool, Option<u32>);

fn preset_rows(name: &str) -> Option<(u64, &'static [MemoryRow])> {
    // Scratch order is the table's preferred order (DTCM, SRAM, MRAM, PSRAM) restricted to
    // writable memories; MRAM is read-only at run time, ITCM is left to pinned tensors.
    const GENERIC: &[MemoryRow] = &[("SRAM", None, true, Some(0)), ("FLASH", None, false, None)];
    const APOLLO3: &[MemoryRow] = &[
        ("DTCM", Some(65_536), true, Some(0)),
        ("SRAM", Some(327_680), true, Some(1)),
        ("MRAM", Some(1_048_576), false, None),
    ];
    const APOLLO4P: &[MemoryRow] = &[
        ("DTCM", Some(393_216), true, Some(0)),
        ("SRAM", Some(1_048_576), true, Some(1)),
        ("MRAM", Some(2_048_000), false, None),
    ];
    const APOLLO510: &[MemoryRow] = &[
        ("DTCM", Some(507_904), true, Some(0)),
        ("SRAM", Some(3_145_728), true, Some(1)),
        ("MRAM", Some(4_128_768), false, None),
        ("ITCM", Some(262_144), true, None),
        ("PSRAM", Some(67_108_864), true, Some(2)),
    ];
    match name {
        // Minimum alignment 1 on the generic target: slots are aligned as their tensors need
        // (element size, hints, rules) and arenas to 16, so MiniMalloc and TFLite Micro traces
        // keep their own byte counts.
        "generic" => Some((1, GENERIC)),
        "apollo3_evb" => Some((4, APOLLO3)),
        "apollo4p_evb" => Some((4, APOLLO4P)),
        "apollo510_evb" => Some((16, APOLLO510)),
        _ => None,
    }
}

impl Target {
    /// One unbounded writable `SRAM` for scratch and a read-only `FLASH` for constants.
    pub fn generic() -> Target {
        Target::preset("generic").expect("the generic preset exists")
    }

    /// A built-in target by name.
    pub fn preset(name: &str) -> Option<Target> {
        let (min_alignment, rows) = preset_rows(name)?;
        Some(Target {
            name: name.to_string(),
            min_alignment,
            memories: rows
                .iter()
                .map(|&(name, capacity, writable, scratch_order)| TargetMemory {
                    name: name.to_string(),
                    capacity,
                    writable,
                    scratch_order,
                })
                .collect(),
        })
    }

    /// `--target NAME|FILE`: no value is the generic target; a preset name; else a JSON file.
    pub fn load(spec: Option<&str>) -> Result<Target> {
        let Some(spec) = spec else {
            return Ok(Target::generic());
        };
        if let Some(target) = Target::preset(spec) {
            return Ok(target);
        }
        let path = Path::new(spec);
        if !path.exists() {
            return Err(Error::input(format!(
                "--target {spec}: not a built-in target ({}) and no such file",
                PRESET_NAMES.join(", ")
            )));
        }
        Target::read(path)
    }

    /// Reads a target JSON file (see docs/model-format.md, "Targets").
    pub fn read(path: &Path) -> Result<Target> {
        let text = read_text(path, "a target JSON", MAX_SETTINGS_FILE_BYTES)?;
        let doc: TargetDoc = parse_json(path, &text, "a target JSON (docs/model-format.md)")?;
        let at = |what: String| Error::input(format!("{}: {what}", path.display()));
        let min_alignment = doc.min_alignment.unwrap_or(1);
        if let Some(problem) = alignment_problem(min_alignment) {
            return Err(at(format!("min_alignment: {problem}")));
        }
        if doc.memories.is_empty() {
            return Err(at("the target has no memories; list at least one".into()));
        }
        let mut memories: Vec<TargetMemory> = Vec::with_capacity(doc.memories.len());
        for (index, memory) in doc.memories.into_iter().enumerate() {
            let name = memory.name.to_ascii_uppercase();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(at(format!(
                    "memories[{index}]: name {:?} must be letters, digits or `_` (it becomes part of C symbols)",
                    memory.name
                )));
            }
            if memories.iter().any(|m| m.name == name) {
                return Err(at(format!(
                    "memories[{index}]: memory {name} is listed twice"
                )));
            }
            let writable = memory.writable.unwrap_or(true);
            if memory.order.is_some() && !writable {
                return Err(at(format!(
                    "memories[{index}] ({name}): a read-only memory cannot take scratch; remove `order` or make it writable"
                )));
            }
            memories.push(TargetMemory {
                name,
                capacity: memory.capacity,
                writable,
                scratch_order: memory.order,
            });
        }
        if !memories.iter().any(|m| m.scratch_order.is_some()) {
            return Err(at(
                "no memory has a scratch `order`; give at least one writable memory an `order`"
                    .into(),
            ));
        }
        Ok(Target {
            name: doc.name.unwrap_or_else(|| path.display().to_string()),
            memories,
            min_alignment,
        })
    }

    /// Index of the memory called `name` (case-insensitive).
    pub fn memory_index(&self, name: &str) -> Option<usize> {
        self.memories
            .iter()
            .position(|m| m.name.eq_ignore_ascii_case(name))
    }

    /// The memory names, for messages: `DTCM, SRAM, MRAM`.
    pub fn memory_names(&self) -> String {
        let names: Vec<&str> = self.memories.iter().map(|m| m.name.as_str()).collect();
        names.join(", ")
    }

    /// Where constants are stored unless a rule says otherwise: the first read-only memory
    /// (FLASH, MRAM), else the first memory of the scratch order.
    pub fn default_constant_memory(&self) -> usize {
        self.memories
            .iter()
            .position(|m| !m.writable)
            .or_else(|| {
                (0..self.memories.len())
                    .filter(|&i| self.memories[i].scratch_order.is_some())
                    .min_by_key(|&i| self.memories[i].scratch_order)
            })
            .unwrap_or(0)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetDoc {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    min_alignment: Option<u64>,
    memories: Vec<MemoryDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryDoc {
    name: String,
    #[serde(default)]
    capacity: Option<u64>,
    #[serde(default)]
    writable: Option<bool>,
    #[serde(default)]
    order: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("memplan-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn presets_follow_the_facts() {
        let apollo510 = Target::preset("apollo510_evb").unwrap();
        assert_eq!(apollo510.min_alignment, 16);
        assert_eq!(apollo510.memory_names(), "DTCM, SRAM, MRAM, ITCM, PSRAM");
        assert_eq!(apollo510.default_constant_memory(), 2);
        let apollo3 = Target::preset("apollo3_evb").unwrap();
        assert_eq!(apollo3.memories[0].capacity, Some(65_536));
        assert!(!apollo3.memories[2].writable);
        let generic = Target::load(None).unwrap();
        assert_eq!(generic.memory_names(), "SRAM, FLASH");
        assert_eq!(generic.memories[0].capacity, None);
        assert_eq!(generic.default_constant_memory(), 1);
    }

    #[test]
    fn reads_a_target_file_with_uppercase_names() {
        let path = write(
            "board.json",
            r#"{"name":"board","min_alignment":8,"memories":[
                {"name":"tcm","capacity":1024,"order":0},
                {"name":"flash","writable":false}]}"#,
        );
        let target = Target::load(Some(path.to_str().unwrap())).unwrap();
        assert_eq!(target.name, "board");
        assert_eq!(target.memory_names(), "TCM, FLASH");
        assert_eq!(target.memory_index("Tcm"), Some(0));
        assert_eq!(target.default_constant_memory(), 1);
    }

    #[test]
    fn bad_targets_are_input_errors() {
        let cases = [
            (
                r#"{"min_alignment":3,"memories":[{"name":"A","order":0}]}"#,
                "power of two",
            ),
            (r#"{"memories":[]}"#, "no memories"),
            (
                r#"{"memories":[{"name":"A","order":0},{"name":"a"}]}"#,
                "listed twice",
            ),
            (
                r#"{"memories":[{"name":"A","writable":false,"order":0}]}"#,
                "read-only",
            ),
            (r#"{"memories":[{"name":"A"}]}"#, "scratch `order`"),
            (
                r#"{"memories":[{"name":"A-B","order":0}]}"#,
                "letters, digits",
            ),
            (
                r#"{"memories":[{"name":"A","capacity":-1}]}"#,
                "board-bad.json:1:",
            ),
        ];
        for (text, expected) in cases {
            let path = write("board-bad.json", text);
            let error = Target::read(&path).unwrap_err();
            assert_eq!(error.kind, crate::ErrorKind::Input);
            assert!(
                error.message.contains(expected),
                "{text}: {}",
                error.message
            );
        }
        let error = Target::load(Some("no_such_board")).unwrap_err();
        assert!(error.message.contains("apollo510_evb"), "{}", error.message);
    }
}
