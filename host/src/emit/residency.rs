//! `{prefix}_residency.json`: where everything lives, for people and scripts (heliaAOT's
//! residency report, extended with lower bounds and sidecar names).

use memplan_plugin_api::ArenaRole;
use serde::Serialize;

use crate::render::{Region, RenderPlan};

/// Version of this document's layout; bump it when a field changes meaning or goes away.
/// 2: tensor records leave out what their region says (role, memory, source memory), give
/// `name` only where it differs from `id` and `c_name` only where it is not
/// `{prefix}_tensor_{id}`, and the lifetime as `steps: [first, last]`: a million tensors take
/// 125 MB instead of 349.
const SCHEMA_VERSION: u32 = 2;

#[derive(Serialize)]
struct Residency<'a> {
    schema_version: u32,
    module_prefix: &'a str,
    plan_hash: &'a str,
    tensor_layout_hash: &'a str,
    external_arenas: bool,
    num_steps: u32,
    /// The operator order the steps follow, when memplan changed it (`--order best`): the
    /// model's operator indices in run order; step `k + 1` runs `operator_order[k]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    operator_order: Option<&'a [u32]>,
    arenas: ArenasByRole<'a>,
    tensors: Vec<TensorRecord<'a>>,
}

#[derive(Serialize)]
struct ArenasByRole<'a> {
    scratch: Vec<ArenaRecord<'a>>,
    persistent: Vec<ArenaRecord<'a>>,
    constant: Vec<ArenaRecord<'a>>,
}

#[derive(Serialize)]
struct ArenaRecord<'a> {
    region_id: usize,
    c_name: &'a str,
    memory: &'a str,
    /// End of the highest tensor.
    used: u64,
    total_size: u64,
    alignment: u64,
    /// The arena's lower bound: the most bytes live at any one step.
    peak_live: u64,
    /// `total_size - peak_live`.
    fragmentation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    source_memory: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tensor_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_symbol: Option<&'a str>,
    /// SHA-256 of the payload's bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_sha256: Option<&'a str>,
    /// Written only with external arenas.
    #[serde(skip_serializing_if = "Option::is_none")]
    sidecar: Option<&'a str>,
}

#[derive(Serialize)]
struct TensorRecord<'a> {
    id: &'a str,
    /// Only where it differs from `id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    /// Only where it is not `{prefix}_tensor_{id}` (ids that are not C identifiers).
    #[serde(skip_serializing_if = "Option::is_none")]
    c_name: Option<&'a str>,
    kind: &'static str,
    /// `null` for empty tensors, which take no space, and for external ones.
    region_id: Option<usize>,
    /// Only for external tensors (in a buffer the caller binds): `true`; their `offset` is the
    /// view offset in their root's buffer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    external: bool,
    offset: u64,
    size: u64,
    alignment: u64,
    /// First and last step of the inclusive lifetime.
    steps: [u32; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    alias_of: Option<&'a str>,
}

fn arena_record<'a>(plan: &'a RenderPlan, region: &'a Region) -> ArenaRecord<'a> {
    let payload = region.payload.as_ref();
    ArenaRecord {
        region_id: region.id,
        c_name: &region.c_name,
        memory: &region.memory,
        used: region.used,
        total_size: region.size,
        alignment: region.alignment,
        peak_live: region.lower_bound,
        fragmentation: region.fragmentation(),
        source_memory: payload.map(|_| region.source_memory.as_str()),
        kind: region.constant_kind(),
        tensor_count: payload.map(|_| {
            region
                .tensors
                .iter()
                .filter(|&&tensor| plan.tensors[tensor].alias_of.is_none())
                .count()
        }),
        payload_symbol: payload.map(|payload| payload.symbol.as_str()),
        payload_sha256: payload.map(|payload| payload.sha256.as_str()),
        sidecar: payload
            .filter(|_| plan.external_arenas)
            .map(|payload| payload.sidecar.as_str()),
    }
}

/// Writes the residency report into `out`.
pub fn write_residency_json(
    out: &mut dyn std::io::Write,
    plan: &RenderPlan,
) -> std::io::Result<()> {
    let by_role = |role| {
        plan.regions
            .iter()
            .filter(|region| region.role == role)
            .map(|region| arena_record(plan, region))
            .collect()
    };
    let tensor_prefix = format!("{}_tensor_", plan.prefix);
    let document = Residency {
        schema_version: SCHEMA_VERSION,
        module_prefix: &plan.prefix,
        plan_hash: &plan.plan_hash,
        tensor_layout_hash: &plan.tensor_layout_hash,
        external_arenas: plan.external_arenas,
        num_steps: plan.num_steps,
        operator_order: plan.changed_order(),
        arenas: ArenasByRole {
            scratch: by_role(ArenaRole::Scratch),
            persistent: by_role(ArenaRole::Persistent),
            constant: by_role(ArenaRole::Constant),
        },
        tensors: plan
            .tensors
            .iter()
            .map(|tensor| TensorRecord {
                id: &tensor.id,
                name: (tensor.name != tensor.id).then_some(tensor.name.as_str()),
                c_name: (tensor.c_name.strip_prefix(&tensor_prefix) != Some(&tensor.id))
                    .then_some(tensor.c_name.as_str()),
                kind: tensor.kind.as_str(),
                region_id: tensor.region,
                external: tensor.external,
                offset: tensor.offset,
                size: tensor.size,
                alignment: tensor.alignment,
                steps: [tensor.lifetime.first, tensor.lifetime.last],
                alias_of: tensor
                    .alias_of
                    .and_then(|root| plan.tensors.get(root))
                    .map(|root| root.id.as_str()),
            })
            .collect(),
    };
    // One tensor per line (see `json_layout`).
    crate::json_layout::to_writer(out, &document, 2)
}
