//! The plan file format (`{prefix}_plan.json`): written by emit, read by `memplan check`.
//!
//! Tensors are named by id and memories by name (never by index), so that other tools can
//! write plans too and a plan stays readable when the model's tensor order changes. The
//! format is documented for users in `docs/plan-format.md`; keep the two in step.
//!
//! Reading resolves names against the analysed model. A name that does not resolve is not a
//! parse error: an allocation of an unknown tensor id is a contract-1 violation and a memory
//! the target does not have is a contract-2 violation, reported by the checker with every
//! other violation of the plan. Only a file that is not a plan document at all (malformed
//! JSON, missing fields, another format or version) is bad input (exit 2).

use std::collections::HashMap;
use std::path::Path;

use abi_stable::std_types::{RString, RVec};
use memplan_plugin_api::{Allocation, Arena, ArenaRole, Binding, MemoryPlan};
use serde::{Deserialize, Serialize};

use crate::analyze::Analysis;
use crate::check::{CheckedPlan, Resolution, Violation, ViolationKind};
use crate::error::{Error, Result};

/// The value of the `format` field.
pub const FORMAT_NAME: &str = "memplan-plan";
/// The format version this memplan writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// A whole plan file. Read with its allocations in a `Vec`; written with
/// [`AllocationEntries`], which makes each entry as it is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanDocument<Allocations = Vec<AllocationEntry>> {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// Always [`FORMAT_VERSION`] for files this memplan reads.
    pub version: u32,
    /// The planner that made the plan (informational).
    #[serde(default)]
    pub planner: String,
    /// The planner's one-line summary (informational).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Every planner the run used (`--planner a,b,c`: each, in that order), with what tells
    /// it apart later (informational).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planners: Vec<PlannerRecord>,
    /// The target the plan was made for (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The operator order the plan holds for, when memplan changed it (`--order best`): the
    /// model's operator indices (subgraph 0 of a `.tflite`) in run order. Absent: the order
    /// the model stores. `memplan check` refuses an order that is not valid for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_order: Option<Vec<u32>>,
    pub arenas: Vec<ArenaEntry>,
    pub allocations: Allocations,
    /// Tensors in buffers the caller owns: no allocation, no arena bytes. `memplan check`
    /// takes them as external, as the plan was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external: Vec<ExternalEntry>,
}

/// One external tensor: its id, and (informational) its name and size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalEntry {
    pub tensor: TensorId,
    /// Written by memplan where it differs from the id; ignored when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Written by memplan; ignored when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A planner of the run: name, version and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannerRecord {
    pub name: String,
    pub version: String,
    /// The plugin file it was loaded from, or `built in` for memplan's own.
    pub file: String,
    /// That file's SHA-256 (lowercase hex), or `built in`.
    pub sha256: String,
}

/// One arena: `(role, memory)` with its source memory, size and base alignment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArenaEntry {
    pub role: ArenaRole,
    /// Runtime memory name.
    pub memory: String,
    /// Memory the initial bytes come from; defaults to `memory` (only staged constant arenas
    /// differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_memory: Option<String>,
    pub size: u64,
    pub alignment: u64,
    /// Written by memplan beside every arena; ignored when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<u64>,
}

/// One tensor's binding: `(role, memory, source_memory, offset)` and its size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationEntry {
    /// The tensor's id in the model.
    pub tensor: TensorId,
    /// The tensor's name (informational, written by memplan; ignored when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub role: ArenaRole,
    pub memory: String,
    /// Defaults to `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_memory: Option<String>,
    pub offset: u64,
    pub size: u64,
}

/// A tensor id: memplan writes a string; numeric ids may also be written as JSON integers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TensorId {
    Text(String),
    Number(u64),
}

impl TensorId {
    fn to_text(&self) -> String {
        match self {
            TensorId::Text(text) => text.clone(),
            TensorId::Number(number) => number.to_string(),
        }
    }
}

/// A plan file read and resolved against a model.
#[derive(Clone, Debug)]
pub struct ReadPlan {
    /// The `planner` field of the file.
    pub planner: String,
    /// The plan in request indices; what could not be resolved is in `resolution`.
    pub plan: MemoryPlan,
    /// Unknown memory names and unknown tensor ids, for the checker.
    pub resolution: Resolution,
}

/// The plan file document of a checked plan, with tensor names and arena lower bounds.
pub fn to_document<'a>(
    analysis: &'a Analysis,
    checked: &'a CheckedPlan,
    planner: &str,
    planners: &[PlannerRecord],
) -> PlanDocument<AllocationEntries<'a>> {
    let arenas = checked
        .plan
        .arenas
        .iter()
        .zip(&checked.lower_bounds)
        .map(|(arena, &lower_bound)| ArenaEntry {
            role: arena.role,
            memory: memory_name(analysis, arena.memory),
            source_memory: source_memory_name(analysis, arena.memory, arena.source_memory),
            size: arena.size,
            alignment: arena.alignment,
            lower_bound: Some(lower_bound),
        })
        .collect();
    PlanDocument {
        format: FORMAT_NAME.to_string(),
        version: FORMAT_VERSION,
        planner: planner.to_string(),
        summary: checked.plan.summary.to_string(),
        planners: planners.to_vec(),
        target: Some(analysis.target.clone()),
        operator_order: analysis
            .order
            .as_ref()
            .filter(|order| order.applied)
            .map(|order| order.best.clone()),
        arenas,
        allocations: AllocationEntries { analysis, checked },
        external: external_entries(analysis),
    }
}

/// The external tensors of the analysis, in tensor order.
fn external_entries(analysis: &Analysis) -> Vec<ExternalEntry> {
    analysis
        .external
        .indices()
        .map(|index| {
            let id = analysis.request.tensors[index].id.as_str();
            ExternalEntry {
                tensor: TensorId::Text(id.to_string()),
                name: Some(analysis.name_of(index))
                    .filter(|name| *name != id)
                    .map(str::to_string),
                size: Some(analysis.request.tensors[index].size),
            }
        })
        .collect()
}

impl PlanDocument {
    /// The ids the plan lists as external.
    pub fn external_ids(&self) -> Vec<String> {
        self.external
            .iter()
            .map(|entry| entry.tensor.to_text())
            .collect()
    }
}

/// The name of memory `index` of the analysed target.
fn memory_name(analysis: &Analysis, index: u32) -> String {
    analysis.request.memories[index as usize].name.to_string()
}

/// The name of `source`, written only where it differs from `memory` (the default).
fn source_memory_name(analysis: &Analysis, memory: u32, source: u32) -> Option<String> {
    (source != memory).then(|| memory_name(analysis, source))
}

/// The allocations of a checked plan as plan-file entries in tensor order, each made as it
/// is written: a million entries built first would take about 180 MB at memplan's peak.
pub struct AllocationEntries<'a> {
    analysis: &'a Analysis,
    checked: &'a CheckedPlan,
}

impl AllocationEntries<'_> {
    fn entry(&self, allocation: &Allocation) -> AllocationEntry {
        let analysis = self.analysis;
        let index = allocation.tensor as usize;
        let binding = allocation.binding;
        let id = analysis.request.tensors[index].id.as_str();
        AllocationEntry {
            tensor: TensorId::Text(id.to_string()),
            // Informational, and only where it says more than the id.
            name: Some(analysis.name_of(index))
                .filter(|name| *name != id)
                .map(str::to_string),
            role: binding.role,
            memory: memory_name(analysis, binding.memory),
            source_memory: source_memory_name(analysis, binding.memory, binding.source_memory),
            offset: binding.offset,
            size: allocation.size,
        }
    }
}

impl Serialize for AllocationEntries<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        let mut allocations: Vec<&Allocation> = self.checked.plan.allocations.iter().collect();
        allocations.sort_by_key(|allocation| allocation.tensor);
        serializer.collect_seq(
            allocations
                .into_iter()
                .map(|allocation| self.entry(allocation)),
        )
    }
}

/// The document as the pretty-printed JSON text of a plan file (with a final newline).
pub fn to_json<Allocations: Serialize>(document: &PlanDocument<Allocations>) -> String {
    // One arena and one allocation per line (see `json_layout`).
    crate::json_layout::to_string(document, 2)
        .expect("a plan document always serializes: it has only strings and integers")
}

/// Reads and parses the plan file at `path` (names are resolved by [`resolve`]).
pub fn read_document(path: &Path) -> Result<PlanDocument> {
    let text = crate::input::source::read_text(
        path,
        "a plan file (docs/plan-format.md)",
        crate::input::source::MAX_MODEL_FILE_BYTES,
    )?;
    parse_document(path, &text)
}

/// Reads a MiniMalloc solution CSV (`id,lower,upper,size,offset`, as `memplan bench
/// --solutions` and MiniMalloc write it) as a plan document for `analysis`: one scratch arena
/// per memory the scratch tensors go to (a tensor's `memory` rule, else the first memory in
/// scratch order), each listed tensor at its offset, aliases at their root's offset plus the
/// view offset and empty tensors at 0 (a solution lists neither). A solution has no constant
/// or persistent arena: the checker reports such tensors of the model as unplaced, as it does
/// a listed id the model does not have.
pub fn read_solution(path: &Path, analysis: &Analysis) -> Result<PlanDocument> {
    // The MiniMalloc reader reads the `offset` column as a fixed placement: the solution.
    let solution = crate::input::csv::read_minimalloc_csv(path)?;
    let request = &analysis.request;
    let default_memory = request.first_scratch_memory().ok_or_else(|| {
        Error::input(format!(
            "{}: target `{}` has no memory for scratch tensors, so a solution cannot be \
                 placed in it",
            path.display(),
            analysis.target
        ))
    })?;
    let index_of: HashMap<&str, usize> = request
        .tensors
        .iter()
        .enumerate()
        .map(|(index, tensor)| (tensor.id.as_str(), index))
        .collect();
    let mut offsets: Vec<Option<u64>> = vec![None; request.tensors.len()];
    let mut allocations = Vec::new();
    let memory_of = |index: usize| -> u32 {
        request.tensors[index]
            .memory
            .into_option()
            .unwrap_or(default_memory)
    };
    for row in &solution.tensors {
        let Some(offset) = row.fixed_offset else {
            return Err(Error::input(format!(
                "{}: buffer `{}` has no offset; a solution CSV gives every buffer one (columns \
                 id,lower,upper,size,offset)",
                path.display(),
                row.id
            )));
        };
        let memory = match index_of.get(row.id.as_str()) {
            Some(&index) => {
                offsets[index] = Some(offset);
                memory_of(index)
            }
            None => default_memory,
        };
        allocations.push((row.id.clone(), memory, offset, row.size));
    }
    for (index, tensor) in request.tensors.iter().enumerate() {
        if tensor.kind.role() != ArenaRole::Scratch || offsets[index].is_some() {
            continue;
        }
        let offset = match tensor.alias_of.into_option() {
            Some(alias) => match offsets.get(alias.root as usize).copied().flatten() {
                Some(root) => root.saturating_add(alias.offset),
                None => continue,
            },
            None if tensor.size == 0 => 0,
            None => continue,
        };
        allocations.push((tensor.id.to_string(), memory_of(index), offset, tensor.size));
    }
    let mut arenas: Vec<ArenaEntry> = Vec::new();
    for &(ref id, memory, offset, size) in &allocations {
        let alignment = index_of
            .get(id.as_str())
            .map_or(1, |&index| request.tensors[index].alignment)
            .max(request.memories[memory as usize].arena_alignment)
            .max(1);
        let name = memory_name(analysis, memory);
        let end = offset.saturating_add(size);
        match arenas.iter_mut().find(|arena| arena.memory == name) {
            Some(arena) => {
                arena.size = arena.size.max(end);
                arena.alignment = arena.alignment.max(alignment);
            }
            None => arenas.push(ArenaEntry {
                role: ArenaRole::Scratch,
                memory: name,
                source_memory: None,
                size: end,
                alignment,
                lower_bound: None,
            }),
        }
    }
    for arena in &mut arenas {
        // A power of two (the largest of powers of two); the arena ends on it, as planners'
        // arenas do.
        arena.size = arena
            .size
            .checked_next_multiple_of(arena.alignment)
            .unwrap_or(arena.size);
    }
    Ok(PlanDocument {
        format: FORMAT_NAME.to_string(),
        version: FORMAT_VERSION,
        planner: "a solution CSV".to_string(),
        summary: String::new(),
        planners: Vec::new(),
        target: None,
        operator_order: None,
        arenas,
        // A solution places every buffer it lists in its arena: none is external.
        external: Vec::new(),
        allocations: allocations
            .into_iter()
            .map(|(id, memory, offset, size)| AllocationEntry {
                tensor: TensorId::Text(id),
                name: None,
                role: ArenaRole::Scratch,
                memory: memory_name(analysis, memory),
                source_memory: None,
                offset,
                size,
            })
            .collect(),
    })
}

/// Reads the plan file at `path` and resolves it against `analysis`.
pub fn read_plan_file(path: &Path, analysis: &Analysis) -> Result<ReadPlan> {
    Ok(resolve(read_document(path)?, analysis))
}

/// Reads plan file text (`path` only names it in messages) and resolves it against
/// `analysis`. The entry for fuzzing: never panics, whatever the text.
pub fn read_plan_text(path: &Path, text: &str, analysis: &Analysis) -> Result<ReadPlan> {
    let document = parse_document(path, text)?;
    Ok(resolve(document, analysis))
}

/// Parses plan file text; `path` is for messages only.
pub fn parse_document(path: &Path, text: &str) -> Result<PlanDocument> {
    let document: PlanDocument = serde_json::from_str(text).map_err(|error| {
        let message = error.to_string();
        let position = format!(" at line {} column {}", error.line(), error.column());
        let message = message.strip_suffix(&position).unwrap_or(&message);
        Error::input(format!(
            "{}:{}:{}: not a valid plan file: {message}",
            path.display(),
            error.line(),
            error.column()
        ))
    })?;
    if document.format != FORMAT_NAME {
        return Err(Error::input(format!(
            "{}: `format` is \"{}\", not \"{FORMAT_NAME}\": this is not a memplan plan file",
            path.display(),
            document.format
        )));
    }
    if document.version != FORMAT_VERSION {
        return Err(Error::input(format!(
            "{}: plan format version {} is not supported; this memplan reads version \
             {FORMAT_VERSION} (write the plan again with this memplan)",
            path.display(),
            document.version
        )));
    }
    Ok(document)
}

/// Turns names into request indices. Unknown memories get indices past the target's own
/// (named in the resolution); allocations of unknown tensors are dropped and reported.
pub fn resolve(document: PlanDocument, analysis: &Analysis) -> ReadPlan {
    let request = &analysis.request;
    let tensor_index: HashMap<&str, u32> = request
        .tensors
        .iter()
        .enumerate()
        .map(|(index, tensor)| (tensor.id.as_str(), index as u32))
        .collect();
    let mut memories = MemoryNames {
        known: request
            .memories
            .iter()
            .enumerate()
            .map(|(index, memory)| (memory.name.to_ascii_uppercase(), index as u32))
            .collect(),
        target_count: request.memories.len(),
        unknown: Vec::new(),
    };
    let mut violations = Vec::new();

    let arenas: RVec<Arena> = document
        .arenas
        .iter()
        .map(|entry| {
            let memory = memories.index(&entry.memory);
            Arena {
                role: entry.role,
                memory,
                source_memory: entry
                    .source_memory
                    .as_deref()
                    .map_or(memory, |name| memories.index(name)),
                size: entry.size,
                alignment: entry.alignment,
            }
        })
        .collect();
    let mut allocations = RVec::with_capacity(document.allocations.len());
    for (position, entry) in document.allocations.iter().enumerate() {
        let id = entry.tensor.to_text();
        let Some(&tensor) = tensor_index.get(id.as_str()) else {
            let message = format!(
                "allocation #{position} (offset {}, {} bytes in the {} arena in {}) names tensor \
                 `{id}`, which model {} does not have; the plan must allocate only the model's \
                 tensors, by their ids",
                entry.offset,
                entry.size,
                entry.role.as_str(),
                entry.memory,
                analysis.source.display()
            );
            violations.push(Violation::new(ViolationKind::UnknownTensor, message));
            continue;
        };
        let memory = memories.index(&entry.memory);
        let source_memory = entry
            .source_memory
            .as_deref()
            .map_or(memory, |name| memories.index(name));
        let binding = Binding {
            role: entry.role,
            memory,
            source_memory,
            offset: entry.offset,
        };
        // The file has one offset per tensor: the binding's and the allocation's.
        allocations.push(Allocation::new(tensor, binding, entry.size));
    }
    ReadPlan {
        planner: document.planner,
        plan: MemoryPlan {
            arenas,
            allocations,
            summary: RString::from(document.summary),
        },
        resolution: Resolution {
            unknown_memory_names: memories.unknown,
            violations,
        },
    }
}

/// Memory names to indices: the target's memories (matched case-insensitively, as memory
/// names are uppercase by convention), then each unknown name in order of appearance.
struct MemoryNames {
    known: HashMap<String, u32>,
    /// The target's memories: unknown names are numbered after them.
    target_count: usize,
    unknown: Vec<String>,
}

impl MemoryNames {
    fn index(&mut self, name: &str) -> u32 {
        let key = name.to_ascii_uppercase();
        if let Some(&index) = self.known.get(&key) {
            return index;
        }
        // Past the target's memories, in order of appearance (`known` holds both kinds).
        let index = (self.target_count + self.unknown.len()) as u32;
        self.known.insert(key, index);
        self.unknown.push(name.to_string());
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check_resolved_plan;
    use crate::error::ErrorKind;
    use abi_stable::std_types::{RNone, RSome};
    use memplan_plugin_api::{Lifetime, MemoryRequest, PlanRequest, TensorKind, TensorRequest};

    fn tensor(id: &str, kind: TensorKind, size: u64) -> TensorRequest {
        TensorRequest {
            id: RString::from(id),
            kind,
            size,
            alignment: 16,
            lifetime: Lifetime::new(0, 1),
            alias_of: RNone,
            fixed_offset: RNone,
            memory: RNone,
            source_memory: RNone,
        }
    }

    fn memory(name: &str, writable: bool) -> MemoryRequest {
        MemoryRequest {
            name: RString::from(name),
            budget: RNone,
            writable,
            scratch_order: if writable { RSome(0) } else { RNone },
            arena_alignment: 16,
        }
    }

    /// Two scratch tensors and a staged constant (MRAM -> SRAM).
    fn analysis() -> Analysis {
        let mut weights = tensor("w", TensorKind::Constant, 32);
        weights.memory = RSome(0);
        weights.source_memory = RSome(1);
        let tensors = vec![
            tensor("0", TensorKind::Input, 16),
            tensor("1", TensorKind::Output, 16),
            weights,
        ];
        crate::check::testing::analysis(
            PlanRequest {
                tensors: RVec::from(tensors),
                memories: RVec::from(vec![memory("SRAM", true), memory("MRAM", false)]),
                num_steps: 2,
                options: RString::from("{}"),
            },
            &["in", "out", "weights"],
        )
    }

    fn valid_text() -> &'static str {
        r#"{
  "format": "memplan-plan", "version": 1, "planner": "hand",
  "arenas": [
    {"role": "scratch", "memory": "SRAM", "size": 32, "alignment": 16},
    {"role": "constant", "memory": "SRAM", "source_memory": "MRAM", "size": 32, "alignment": 16}
  ],
  "allocations": [
    {"tensor": "0", "role": "scratch", "memory": "SRAM", "offset": 0, "size": 16},
    {"tensor": 1, "role": "scratch", "memory": "sram", "offset": 16, "size": 16},
    {"tensor": "w", "role": "constant", "memory": "SRAM", "source_memory": "MRAM", "offset": 0, "size": 32}
  ]
}"#
    }

    fn read(text: &str) -> Result<ReadPlan> {
        let document = parse_document(Path::new("plan.json"), text)?;
        Ok(resolve(document, &analysis()))
    }

    #[test]
    fn unknown_memories_are_numbered_one_after_another_past_the_targets() {
        let mut names = MemoryNames {
            known: [("SRAM".to_string(), 0), ("FLASH".to_string(), 1)].into(),
            target_count: 2,
            unknown: Vec::new(),
        };
        assert_eq!(names.index("DTCM"), 2);
        assert_eq!(names.index("MRAM"), 3);
        assert_eq!(names.index("dtcm"), 2);
        assert_eq!(names.index("flash"), 1);
        assert_eq!(names.unknown, ["DTCM", "MRAM"]);
    }

    #[test]
    fn a_hand_written_plan_resolves_and_passes() {
        let read = read(valid_text()).expect("valid");
        assert_eq!(read.planner, "hand");
        assert!(read.resolution.violations.is_empty());
        assert_eq!(read.plan.allocations[1].tensor, 1);
        assert_eq!(read.plan.arenas[1].source_memory, 1);
        let checked = check_resolved_plan(&analysis(), read.plan, read.resolution).expect("ok");
        assert_eq!(checked.lower_bounds, vec![32, 32]);
    }

    #[test]
    fn written_documents_read_back_to_the_same_plan() {
        let analysis = analysis();
        let read = read(valid_text()).unwrap();
        let checked = check_resolved_plan(&analysis, read.plan.clone(), read.resolution).unwrap();
        let document = to_document(&analysis, &checked, "hand", &[]);
        let text = to_json(&document);
        assert!(text.contains("\"lower_bound\":32"), "{text}");
        assert!(text.contains("\"name\":\"weights\""), "{text}");
        let again = resolve(parse_document(Path::new("p"), &text).unwrap(), &analysis);
        assert_eq!(again.plan, read.plan);
        assert_eq!(again.planner, "hand");
    }

    #[test]
    fn unknown_tensor_ids_and_memories_become_violations() {
        let text = valid_text()
            .replace(r#""tensor": "w""#, r#""tensor": "ghost""#)
            .replace(r#""memory": "sram""#, r#""memory": "FLASH""#);
        let read = read(&text).expect("names that do not resolve are not a parse error");
        let violations =
            check_resolved_plan(&analysis(), read.plan, read.resolution).expect_err("rejected");
        let kinds: Vec<ViolationKind> = violations.iter().map(|v| v.kind).collect();
        assert_eq!(
            kinds,
            vec![
                ViolationKind::UnknownTensor,
                ViolationKind::MissingAllocation,
                ViolationKind::UnknownMemory,
            ],
            "{violations:#?}"
        );
        assert!(violations.0[0].message.contains("`ghost`"));
        assert!(violations.0[0].message.contains("model.json"));
        assert!(violations.0[1].message.contains("`w`"));
        assert!(violations.0[2].message.contains("FLASH"));
        assert!(violations.0[2].message.contains("SRAM, MRAM"));
    }

    #[test]
    fn malformed_json_is_bad_input_with_line_and_column() {
        let error = read("{\n  \"format\": \"memplan-plan\",\n  \"version\": 1,,\n}").unwrap_err();
        assert_eq!(error.kind, ErrorKind::Input);
        assert!(
            error.message.starts_with("plan.json:3:16: "),
            "{}",
            error.message
        );
        assert!(!error.message.contains(" at line "), "{}", error.message);
    }

    #[test]
    fn missing_fields_and_other_formats_are_bad_input() {
        let error = read(r#"{"format": "memplan-plan", "version": 1}"#).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Input);
        assert!(error.message.contains("arenas"), "{}", error.message);

        let error = read(&valid_text().replace("memplan-plan", "residency")).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Input);
        assert!(
            error.message.contains("not a memplan plan file"),
            "{}",
            error.message
        );

        let error = read(&valid_text().replace("\"version\": 1", "\"version\": 2")).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Input);
        assert!(error.message.contains("version 2"), "{}", error.message);
    }

    #[test]
    fn a_missing_file_is_bad_input_naming_it() {
        let error = read_plan_file(Path::new("/nonexistent/plan.json"), &analysis()).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Input);
        assert!(
            error.message.contains("/nonexistent/plan.json"),
            "{}",
            error.message
        );
    }
}
