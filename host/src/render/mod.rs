//! Render stage: turns a checked plan into what firmware sees — regions in their documented
//! order, the plan and tensor-layout hashes, one packed blob per constant arena, C names and
//! sidecar file names — so that emit only formats and writes.
//!
//! Region order (docs/output-files.md): scratch arenas, then persistent, then constant; within a role by
//! memory name ascending. A region's id is its index in that order.

mod blob;
mod hash;
mod names;
pub mod tflite_offline;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use memplan_plugin_api::{Allocation, ArenaRole, Lifetime, MemoryRequest, PlanRequest, TensorKind};

use crate::analyze::Analysis;
use crate::check::CheckedPlan;
use crate::error::{Error, Result};
use crate::plan_file;

pub use blob::{ConstantPayload, Segment};

/// Options of the render stage.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// Prefix of file names and C symbols (`--prefix`), a C identifier.
    pub prefix: String,
    /// Arenas are bound at run time instead of defined as static buffers.
    pub external_arenas: bool,
    /// Name of the planner whose plan is rendered (recorded in the plan file).
    pub planner: String,
    /// Every planner of the run (recorded in the plan file).
    pub planners: Vec<plan_file::PlannerRecord>,
    /// Also write the input `.tflite` model with memplan's offline plan (`--emit-tflite`).
    pub emit_tflite: bool,
}

/// One arena of the plan as firmware sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// Index in region order.
    pub id: usize,
    pub role: ArenaRole,
    /// Runtime memory name (uppercase).
    pub memory: String,
    /// Memory the initial bytes come from; differs from `memory` only for staged constants.
    pub source_memory: String,
    pub size: u64,
    pub alignment: u64,
    /// No plan of this arena's tensors can be smaller (from the checker).
    pub lower_bound: u64,
    /// End of the highest tensor placed in the arena.
    pub used: u64,
    /// Budget of the runtime memory, `None` when unbounded.
    pub budget: Option<u64>,
    /// C name: `{prefix}_arena_{mem}`, `{prefix}_arena_persistent_{mem}` or
    /// `{prefix}_arena_const_{mem}`.
    pub c_name: String,
    /// Rendered tensors with bytes in this arena (aliases included), by offset then index.
    pub tensors: Vec<usize>,
    /// Constant arenas only: the packed bytes.
    pub payload: Option<ConstantPayload>,
}

impl Region {
    /// A constant arena copied at boot from another memory.
    pub fn is_staged(&self) -> bool {
        self.role == ArenaRole::Constant && self.memory != self.source_memory
    }

    /// `cold` or `staged` for constant arenas.
    pub fn constant_kind(&self) -> Option<&'static str> {
        match (self.role, self.is_staged()) {
            (ArenaRole::Constant, true) => Some("staged"),
            (ArenaRole::Constant, false) => Some("cold"),
            _ => None,
        }
    }

    /// C name of the writable buffer backing the arena (scratch, persistent, staged).
    pub fn buffer_symbol(&self) -> String {
        format!("{}_buffer", self.c_name)
    }

    /// Whether the arena needs writable memory at run time (everything but cold constants).
    pub fn is_writable(&self) -> bool {
        self.role != ArenaRole::Constant || self.is_staged()
    }

    /// Bytes the placement spends above the arena's lower bound: the end of its highest
    /// tensor less the bound. The arena's rounding up to its alignment (`size - used`) is not
    /// fragmentation and is not counted.
    pub fn fragmentation(&self) -> u64 {
        self.used.saturating_sub(self.lower_bound)
    }

    /// `fragmentation` as a percentage of the arena size (0 for an empty arena).
    pub fn fragmentation_percent(&self) -> f64 {
        percent(self.fragmentation(), self.size)
    }

    /// The arena's share of its memory's budget, `None` when the memory is unbounded.
    pub fn budget_use_percent(&self) -> Option<f64> {
        self.budget.map(|budget| percent(self.size, budget))
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// One tensor and where it is bound.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedTensor {
    pub id: String,
    /// Name in the model (may equal the id).
    pub name: String,
    /// Enum constant naming the tensor: `{prefix}_tensor_{sanitized id}`.
    pub c_name: String,
    pub kind: TensorKind,
    pub role: ArenaRole,
    pub memory: Arc<str>,
    pub source_memory: Arc<str>,
    /// Region holding its bytes; `None` for empty tensors, which take no space.
    pub region: Option<usize>,
    pub offset: u64,
    pub size: u64,
    pub alignment: u64,
    pub lifetime: Lifetime,
    /// Index of the root tensor when this tensor is a view of it.
    pub alias_of: Option<usize>,
    /// In a buffer the caller owns and binds at run time (`analyze::external`): no region,
    /// `offset` is the view offset in its root's buffer (0 for the root), `memory` and
    /// `source_memory` are empty.
    pub external: bool,
}

/// What the emit stage needs, and nothing it would have to compute.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderPlan {
    pub prefix: String,
    pub external_arenas: bool,
    /// Number of op steps of the model.
    pub num_steps: u32,
    /// Regions in region order (`regions[i].id == i`).
    pub regions: Vec<Region>,
    /// Tensors in the request's order.
    pub tensors: Vec<RenderedTensor>,
    /// The model's inputs and outputs (indices into `tensors`), in the model's order.
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    pub plan_hash: String,
    pub tensor_layout_hash: String,
    /// Text of `{prefix}_plan.json` (format: `crate::plan_file`).
    pub plan_document: String,
    /// For a `.tflite` model: the offline plan for TensorFlow Lite Micro and the arena head it
    /// gives.
    pub tflite: Option<tflite_offline::TfliteOfflinePlan>,
    /// Write `{prefix}.tflite`, the model with that plan.
    pub emit_tflite: bool,
    /// What the order stage found; with `applied`, the plan holds for its order only.
    pub order: Option<crate::analyze::order::OperatorOrder>,
}

impl RenderPlan {
    /// The operator order the plan holds for, when memplan changed it (stored operator
    /// indices in run order).
    pub fn changed_order(&self) -> Option<&[u32]> {
        self.order
            .as_ref()
            .filter(|order| order.applied)
            .map(|order| order.best.as_slice())
    }
}

impl RenderPlan {
    /// The prefix in uppercase, for macros.
    pub fn macro_prefix(&self) -> String {
        self.prefix.to_ascii_uppercase()
    }

    /// Regions of constant arenas copied at boot, in region order.
    pub fn staged_regions(&self) -> impl Iterator<Item = &Region> {
        self.regions.iter().filter(|region| region.is_staged())
    }
}

/// Why `--emit-tflite` and external tensors do not go together.
pub const EXTERNAL_WITH_EMIT_TFLITE: &str = "--emit-tflite cannot be combined with external \
    tensors (--external-io, or rules with \"external\": true): the offline plan TensorFlow Lite \
    Micro reads holds arena offsets only, and TFLite Micro has no way to keep a tensor outside \
    its arena. Drop --emit-tflite to get C sources with a bind function per external buffer, \
    or drop the external tensors to write the .tflite";

/// Refuses `--emit-tflite` for a model with external tensors (exit 2), before any planning.
pub fn check_emit_tflite(analysis: &Analysis, options: &RenderOptions) -> Result<()> {
    if options.emit_tflite && analysis.external.any() {
        let first = analysis.external.indices().next().unwrap_or(0);
        return Err(Error::input(format!(
            "{}: tensor '{}' is external. {EXTERNAL_WITH_EMIT_TFLITE}",
            analysis.source.display(),
            analysis.name_of(first)
        )));
    }
    Ok(())
}

/// Checks the options alone (the prefix must be a C identifier), so that the plan command can
/// report a bad `--prefix` before planning.
pub fn check_options(options: &RenderOptions) -> Result<()> {
    names::check_prefix(&options.prefix)
}

/// Renders `checked` for firmware.
pub fn render(
    analysis: &Analysis,
    checked: &CheckedPlan,
    options: &RenderOptions,
) -> Result<RenderPlan> {
    check_options(options)?;
    let plan = &checked.plan;
    if checked.lower_bounds.len() != plan.arenas.len() {
        return Err(Error::internal(format!(
            "the checked plan has {} arenas but {} lower bounds",
            plan.arenas.len(),
            checked.lower_bounds.len()
        )));
    }
    // The plan file's text depends on the checked plan alone: written beside the rest (a
    // million allocations take a few hundred milliseconds).
    std::thread::scope(|scope| {
        let plan_document = scope.spawn(|| {
            plan_file::to_json(&plan_file::to_document(
                analysis,
                checked,
                &options.planner,
                &options.planners,
            ))
        });
        let rendered = render_tables(analysis, checked, options)?;
        let plan_document = match plan_document.join() {
            Ok(document) => document,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok(RenderPlan {
            plan_document,
            ..rendered
        })
    })
}

/// Everything of the render plan but the plan file's text.
fn render_tables(
    analysis: &Analysis,
    checked: &CheckedPlan,
    options: &RenderOptions,
) -> Result<RenderPlan> {
    let request = &analysis.request;
    let plan = &checked.plan;
    let memory_name = |index: u32| memory_of(request, index).map(|memory| memory.name.as_str());

    let mut regions = build_regions(analysis, checked, &options.prefix)?;
    let region_of: BTreeMap<(ArenaRole, &str), usize> = regions
        .iter()
        .map(|region| ((region.role, region.memory.as_str()), region.id))
        .collect();

    let mut allocation_of: Vec<Option<&Allocation>> = vec![None; request.tensors.len()];
    for allocation in plan.allocations.iter() {
        let slot = allocation_of
            .get_mut(allocation.tensor as usize)
            .ok_or_else(|| {
                Error::internal(format!(
                    "the plan places unknown tensor #{}",
                    allocation.tensor
                ))
            })?;
        if slot.replace(allocation).is_some() {
            return Err(Error::internal(format!(
                "the plan places tensor #{} twice",
                allocation.tensor
            )));
        }
    }

    let ids: Vec<&str> = request
        .tensors
        .iter()
        .map(|tensor| tensor.id.as_str())
        .collect();
    let suffixes = names::tensor_suffixes(&ids);
    let memory_names: Vec<Arc<str>> = request
        .memories
        .iter()
        .map(|memory| Arc::from(memory.name.as_str()))
        .collect();
    let mut tensors = Vec::with_capacity(request.tensors.len());
    let no_memory: Arc<str> = Arc::from("");
    for (index, (tensor, suffix)) in request.tensors.iter().zip(&suffixes).enumerate() {
        let external = analysis.external.is_external(index);
        // (role, memory, source memory, region, offset, size): an external tensor's are its
        // kind's role, no memory and no region, its view offset in its buffer, its size.
        let placement = if external {
            let offset = tensor
                .alias_of
                .into_option()
                .map_or(0, |alias| alias.offset);
            let no_memory = || Arc::clone(&no_memory);
            let role = tensor.kind.role();
            (role, no_memory(), no_memory(), None, offset, tensor.size)
        } else {
            let allocation = allocation_of[index].ok_or_else(|| {
                Error::internal(format!(
                    "tensor `{}` has no allocation in the checked plan",
                    tensor.id
                ))
            })?;
            let binding = allocation.binding;
            let memory = memory_name(binding.memory)?;
            let region = if allocation.size == 0 {
                None
            } else {
                let id = region_of.get(&(binding.role, memory)).ok_or_else(|| {
                    Error::internal(format!(
                        "tensor `{}` is bound to a {} arena in {memory} that the plan does not \
                         have",
                        tensor.id,
                        binding.role.as_str()
                    ))
                })?;
                Some(*id)
            };
            let source_memory = memory_names
                .get(binding.source_memory as usize)
                .ok_or_else(|| {
                    Error::internal(format!(
                        "the plan names unknown memory #{}",
                        binding.source_memory
                    ))
                })?;
            (
                binding.role,
                // Shared: a million tensors in one memory need not spell its name a million
                // times.
                Arc::clone(&memory_names[binding.memory as usize]),
                Arc::clone(source_memory),
                region,
                allocation.offset,
                allocation.size,
            )
        };
        let (role, memory, source_memory, region, offset, size) = placement;
        tensors.push(RenderedTensor {
            id: tensor.id.to_string(),
            name: analysis.name_of(index).to_string(),
            c_name: format!("{}_tensor_{suffix}", options.prefix),
            kind: tensor.kind,
            role,
            memory,
            source_memory,
            region,
            offset,
            size,
            alignment: tensor.alignment,
            lifetime: tensor.lifetime,
            alias_of: tensor
                .alias_of
                .into_option()
                .map(|alias| alias.root as usize),
            external,
        });
    }
    for (index, tensor) in tensors.iter().enumerate() {
        if let Some(region) = tensor.region {
            let region = &mut regions[region];
            region.tensors.push(index);
            region.used = region.used.max(tensor.offset.saturating_add(tensor.size));
        }
    }
    for region in &mut regions {
        // Keys gathered once: sorting by looking each tensor up would miss the cache at every
        // comparison of a million-tensor arena.
        let mut keyed: Vec<(u64, usize)> = region
            .tensors
            .iter()
            .map(|&index| (tensors[index].offset, index))
            .collect();
        keyed.sort_unstable();
        region.tensors = keyed.into_iter().map(|(_, index)| index).collect();
        if region.role == ArenaRole::Constant {
            region.payload = Some(pack_payload(region, &tensors, analysis)?);
        }
    }
    check_symbols_are_unique(&regions)?;
    check_emit_tflite(analysis, options)?;
    let tflite = tflite_offline::offline_plan(analysis, checked)?;
    if options.emit_tflite && tflite.is_none() {
        return Err(Error::input(format!(
            "--emit-tflite writes the input .tflite model with memplan's plan, but {} is not a \
             .tflite model",
            analysis.source.display()
        )));
    }

    let inputs = graph_order(&analysis.inputs, request, TensorKind::Input);
    let outputs = graph_order(&analysis.outputs, request, TensorKind::Output);
    Ok(RenderPlan {
        prefix: options.prefix.clone(),
        external_arenas: options.external_arenas,
        num_steps: request.num_steps,
        inputs,
        outputs,
        plan_hash: hash::plan_hash(&regions),
        tensor_layout_hash: hash::tensor_layout_hash(&tensors),
        plan_document: String::new(),
        regions,
        tensors,
        tflite,
        emit_tflite: options.emit_tflite,
        order: analysis.order.clone(),
    })
}

/// The tensors of `kind` (the model's inputs or outputs) in the order the model lists them
/// (`listed`), then any others of that kind in tensor order.
fn graph_order(listed: &[u32], request: &PlanRequest, kind: TensorKind) -> Vec<usize> {
    let of_kind = |index: usize| {
        request
            .tensors
            .get(index)
            .is_some_and(|tensor| tensor.kind == kind)
    };
    let mut taken = vec![false; request.tensors.len()];
    let mut order: Vec<usize> = Vec::new();
    let listed = listed.iter().map(|&index| index as usize);
    for index in listed.chain(0..request.tensors.len()) {
        if of_kind(index) && !std::mem::replace(&mut taken[index], true) {
            order.push(index);
        }
    }
    order
}

/// The memory a plan refers to by index (the checker has made sure it exists).
fn memory_of(request: &PlanRequest, index: u32) -> Result<&MemoryRequest> {
    request
        .memories
        .get(index as usize)
        .ok_or_else(|| Error::internal(format!("the plan names unknown memory #{index}")))
}

/// The plan's arenas as regions, in region order, without their tensors yet.
fn build_regions(analysis: &Analysis, checked: &CheckedPlan, prefix: &str) -> Result<Vec<Region>> {
    let memory = |index: u32| memory_of(&analysis.request, index);
    let mut regions = Vec::with_capacity(checked.plan.arenas.len());
    for (arena, &lower_bound) in checked.plan.arenas.iter().zip(&checked.lower_bounds) {
        let runtime = memory(arena.memory)?;
        let symbol = names::memory_symbol(&runtime.name)?;
        let c_name = match arena.role {
            ArenaRole::Scratch => format!("{prefix}_arena_{symbol}"),
            ArenaRole::Persistent => format!("{prefix}_arena_persistent_{symbol}"),
            ArenaRole::Constant => format!("{prefix}_arena_const_{symbol}"),
        };
        let source = memory(arena.source_memory)?;
        names::memory_symbol(&source.name)?;
        regions.push(Region {
            id: 0,
            role: arena.role,
            memory: runtime.name.to_string(),
            source_memory: source.name.to_string(),
            size: arena.size,
            alignment: arena.alignment,
            lower_bound,
            used: 0,
            budget: runtime.budget.into_option(),
            c_name,
            tensors: Vec::new(),
            payload: None,
        });
    }
    regions.sort_by(|a, b| (a.role, &a.memory).cmp(&(b.role, &b.memory)));
    for pair in regions.windows(2) {
        if (pair[0].role, &pair[0].memory) == (pair[1].role, &pair[1].memory) {
            return Err(Error::internal(format!(
                "the checked plan has two {} arenas in {}",
                pair[0].role.as_str(),
                pair[0].memory
            )));
        }
    }
    for (id, region) in regions.iter_mut().enumerate() {
        region.id = id;
    }
    Ok(regions)
}

/// Packs a constant region's own constants (aliases and empty tensors have no bytes).
fn pack_payload(
    region: &Region,
    tensors: &[RenderedTensor],
    analysis: &Analysis,
) -> Result<ConstantPayload> {
    if region.size > crate::input::model::MAX_CONSTANT_ARENA_BYTES {
        return Err(Error::input(format!(
            "the constant arena in {} would be {} bytes, more than memplan writes out (256 MiB): \
             constant arenas are written in full into the C sources and sidecar files, and this \
             plan leaves that much between its constants",
            region.memory, region.size
        )));
    }
    let placed = region
        .tensors
        .iter()
        .map(|&index| &tensors[index])
        .zip(region.tensors.iter())
        .filter(|(tensor, _)| tensor.alias_of.is_none() && tensor.size > 0)
        .map(|(tensor, &index)| blob::PlacedConstant {
            tensor: index,
            id: &tensor.id,
            offset: tensor.offset,
            size: tensor.size,
            data: analysis
                .constant_data
                .get(index)
                .and_then(|data| data.as_deref()),
        })
        .collect();
    let (bytes, segments) = blob::pack(region.size, placed)?;
    let symbol = if region.is_staged() {
        format!("{}__source", region.c_name)
    } else {
        format!("{}__blob", region.c_name)
    };
    let sha256 = {
        use sha2::{Digest, Sha256};
        format!("{:x}", Sha256::digest(&bytes))
    };
    Ok(ConstantPayload {
        sidecar: format!("{symbol}.bin"),
        symbol,
        bytes,
        sha256,
        segments,
    })
}

/// Memory names like `SRAM` and `PERSISTENT_SRAM` could make two regions' C symbols collide;
/// refuse such a target instead of emitting C that does not compile.
fn check_symbols_are_unique(regions: &[Region]) -> Result<()> {
    let mut seen: BTreeMap<String, &Region> = BTreeMap::new();
    for region in regions {
        let mut symbols = BTreeSet::from([
            region.c_name.clone(),
            format!("{}_size", region.c_name),
            format!("{}_alignment", region.c_name),
            region.buffer_symbol(),
        ]);
        if let Some(payload) = &region.payload {
            symbols.insert(payload.symbol.clone());
        }
        for symbol in symbols {
            if let Some(other) = seen.insert(symbol.clone(), region) {
                return Err(Error::input(format!(
                    "the {} arena in {} and the {} arena in {} would both define the C symbol \
                     `{symbol}`; rename one of these memories in the target description",
                    other.role.as_str(),
                    other.memory,
                    region.role.as_str(),
                    region.memory
                )));
            }
        }
    }
    Ok(())
}
