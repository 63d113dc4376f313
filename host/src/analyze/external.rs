//! External tensors: tensors that live in buffers the caller owns (a camera's DMA frame buffer,
//! an output the application reads in place, weights left where the firmware loaded them)
//! instead of in an arena. They get no arena bytes: the planner never sees them, the arena
//! lower bounds leave them out, the checker rejects a plan that places one, and the C sources
//! give one bind function per external buffer.
//!
//! Which tensors: the resolved attribute `external` ([`crate::input::rules`]: rules, the
//! `--external-io` kinds beneath them, a plan file's list above them). Then alias groups are
//! made whole: a view shares its root's bytes, so
//! - a view of an external root is external (it is a window into the caller's buffer, at its
//!   view offset);
//! - a view marked external whose root is not makes the root external too (the caller's buffer
//!   must hold the root's bytes for the view to be in it), and a log line says so.
//!
//! After that every alias group is all external or all internal, so the planner's request
//! (the internal tensors, renumbered) keeps every alias's root.
//!
//! A fixed offset is an arena offset: an external tensor with one is refused (exit 2).

use std::borrow::Cow;

use abi_stable::std_types::{RSome, RVec};
use memplan_plugin_api::{MemoryPlan, PlanRequest, TensorRequest};

use crate::error::{Error, Result};

/// Which tensors of the model are external, and how the planner's tensor indices map onto
/// the model's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalTensors {
    /// By tensor index; empty when no tensor is external.
    by_tensor: Vec<bool>,
    /// The model index of each tensor the planner sees (the internal ones, in model order);
    /// empty when no tensor is external.
    planned: Vec<u32>,
}

impl ExternalTensors {
    /// Makes alias groups whole (see the module comment) from the tensors `marked` external,
    /// by index. `file` names the model in messages.
    pub fn resolve(file: &str, tensors: &[TensorRequest], marked: Vec<bool>) -> Result<Self> {
        if !marked.iter().any(|&external| external) {
            return Ok(ExternalTensors::default());
        }
        let mut by_tensor = marked;
        // Roots first: an external view pulls its root in.
        for (index, tensor) in tensors.iter().enumerate() {
            if let (true, RSome(alias)) = (by_tensor[index], tensor.alias_of) {
                let root = alias.root as usize;
                if !by_tensor[root] {
                    tracing::info!(
                        "{file}: tensor '{}' is external and a view of '{}', so '{}' is external \
                         too: the caller's buffer holds the root's bytes, the view is at offset {} \
                         in it",
                        tensor.id,
                        tensors[root].id,
                        tensors[root].id,
                        alias.offset
                    );
                    by_tensor[root] = true;
                }
            }
        }
        // Then every view of an external root (roots are chain ends: one pass suffices).
        for (index, tensor) in tensors.iter().enumerate() {
            if let RSome(alias) = tensor.alias_of {
                if by_tensor[alias.root as usize] {
                    by_tensor[index] = true;
                }
            }
        }
        for (index, tensor) in tensors.iter().enumerate() {
            if let (true, RSome(offset)) = (by_tensor[index], tensor.fixed_offset) {
                return Err(Error::input(format!(
                    "{file}: tensor '{}' ({}) is external (in a buffer the caller owns), but the \
                     model fixes it at arena offset {offset}; drop its fixed offset or keep it \
                     in the arena (a rule with \"external\": false)",
                    tensor.id,
                    tensor.kind.as_str()
                )));
            }
        }
        let planned = (0..tensors.len() as u32)
            .filter(|&index| !by_tensor[index as usize])
            .collect();
        Ok(ExternalTensors { by_tensor, planned })
    }

    /// Whether tensor `index` is external.
    pub fn is_external(&self, index: usize) -> bool {
        self.by_tensor.get(index).copied().unwrap_or(false)
    }

    /// Whether any tensor is external.
    pub fn any(&self) -> bool {
        !self.by_tensor.is_empty()
    }

    /// The external tensors' indices, in model order.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.by_tensor
            .iter()
            .enumerate()
            .filter(|(_, &external)| external)
            .map(|(index, _)| index)
    }

    /// The tensors the planner places: all of `tensors` when none is external (borrowed, no
    /// copy), else the internal ones in model order with alias roots renumbered.
    pub fn planner_tensors<'t>(&self, tensors: &'t [TensorRequest]) -> Cow<'t, [TensorRequest]> {
        if !self.any() {
            return Cow::Borrowed(tensors);
        }
        // Model index -> planner index, for alias roots (internal views have internal roots).
        let mut planner_index = vec![u32::MAX; tensors.len()];
        for (position, &index) in self.planned.iter().enumerate() {
            planner_index[index as usize] = position as u32;
        }
        Cow::Owned(
            self.planned
                .iter()
                .map(|&index| {
                    let mut tensor = tensors[index as usize].clone();
                    if let RSome(alias) = &mut tensor.alias_of {
                        alias.root = planner_index[alias.root as usize];
                    }
                    tensor
                })
                .collect(),
        )
    }

    /// The request a planner gets: `request` without the external tensors (borrowed when there
    /// are none).
    pub fn planner_request<'r>(&self, request: &'r PlanRequest) -> Cow<'r, PlanRequest> {
        match self.planner_tensors(&request.tensors) {
            Cow::Borrowed(_) => Cow::Borrowed(request),
            Cow::Owned(tensors) => Cow::Owned(PlanRequest {
                tensors: RVec::from(tensors),
                memories: request.memories.clone(),
                num_steps: request.num_steps,
                options: request.options.clone(),
            }),
        }
    }

    /// A plan made for [`ExternalTensors::planner_request`], in model tensor indices. An index
    /// past the planner's tensors stays past the model's, so the checker reports it as unknown.
    pub fn restore_indices(&self, mut plan: MemoryPlan) -> MemoryPlan {
        if !self.any() {
            return plan;
        }
        let past = self.by_tensor.len() as u64;
        for allocation in plan.allocations.iter_mut() {
            allocation.tensor = match self.planned.get(allocation.tensor as usize) {
                Some(&index) => index,
                None => {
                    let beyond = u64::from(allocation.tensor) - self.planned.len() as u64;
                    u32::try_from(past + beyond).unwrap_or(u32::MAX)
                }
            };
        }
        plan
    }
}

/// A plan file may list as external ids the model does not have (another model's plan).
pub(super) fn warn_unknown_ids(
    file: &str,
    resolver: &crate::input::rules::RuleResolver<'_>,
    tensors: &[TensorRequest],
) {
    let mut unknown: Vec<&str> = resolver.external_ids().collect();
    if unknown.is_empty() {
        return;
    }
    let known: std::collections::HashSet<&str> =
        tensors.iter().map(|tensor| tensor.id.as_str()).collect();
    unknown.retain(|id| !known.contains(id));
    unknown.sort_unstable();
    if let Some(first) = unknown.first() {
        tracing::warn!(
            "the plan lists {} external tensor(s) that {file} does not have (first: '{first}')",
            unknown.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::{RNone, RString};
    use memplan_plugin_api::{
        AliasOf, Allocation, ArenaRole, Binding, Lifetime, MemoryRequest, TensorKind,
    };

    fn tensor(id: &str, kind: TensorKind, alias_of: Option<u32>) -> TensorRequest {
        TensorRequest {
            id: RString::from(id),
            kind,
            size: 16,
            alignment: 16,
            lifetime: Lifetime::new(0, 1),
            alias_of: alias_of.map(|root| AliasOf { root, offset: 0 }).into(),
            fixed_offset: RNone,
            memory: RNone,
            source_memory: RNone,
        }
    }

    /// in(0), mid(1), view(2) of mid, out(3) a view of mid, tail(4) a view of in.
    fn tensors() -> Vec<TensorRequest> {
        use TensorKind::*;
        vec![
            tensor("in", Input, None),
            tensor("mid", Intermediate, None),
            tensor("view", Intermediate, Some(1)),
            tensor("out", Output, Some(1)),
            tensor("tail", Intermediate, Some(0)),
        ]
    }

    #[test]
    fn alias_groups_become_whole() {
        let marked = vec![true, false, false, true, false];
        let external = ExternalTensors::resolve("m.json", &tensors(), marked).unwrap();
        // out pulls its root mid in, mid pulls its other view; in pulls its view tail.
        assert_eq!(external.indices().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        let marked = vec![true, false, false, false, false];
        let external = ExternalTensors::resolve("m.json", &tensors(), marked).unwrap();
        assert_eq!(external.indices().collect::<Vec<_>>(), vec![0, 4]);
    }

    #[test]
    fn the_planner_sees_internal_tensors_renumbered_and_its_plan_comes_back() {
        let tensors = tensors();
        let marked = vec![true, false, false, false, false];
        let external = ExternalTensors::resolve("m.json", &tensors, marked).unwrap();
        let request = PlanRequest {
            tensors: RVec::from(tensors),
            memories: RVec::from(vec![MemoryRequest {
                name: RString::from("SRAM"),
                budget: RNone,
                writable: true,
                scratch_order: RSome(0),
                arena_alignment: 16,
            }]),
            num_steps: 2,
            options: RString::from("{}"),
        };
        let planner = external.planner_request(&request);
        let ids: Vec<&str> = planner.tensors.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["mid", "view", "out"]);
        assert_eq!(
            planner.tensors[2].alias_of,
            RSome(AliasOf { root: 0, offset: 0 })
        );
        let binding = Binding {
            role: ArenaRole::Scratch,
            memory: 0,
            source_memory: 0,
            offset: 0,
        };
        let plan = MemoryPlan {
            arenas: RVec::new(),
            allocations: RVec::from(vec![
                Allocation::new(2, binding, 16),
                Allocation::new(0, binding, 16),
                Allocation::new(4, binding, 16),
            ]),
            summary: RString::new(),
        };
        let restored: Vec<u32> = external
            .restore_indices(plan)
            .allocations
            .iter()
            .map(|allocation| allocation.tensor)
            .collect();
        // Planner 2 is out (model 3), 0 is mid (1); 4 is past the planner's 3 tensors, so
        // past the model's 5.
        assert_eq!(restored, vec![3, 1, 6]);
        let none = ExternalTensors::resolve("m.json", &request.tensors, vec![false; 5]).unwrap();
        assert!(matches!(none.planner_request(&request), Cow::Borrowed(_)));
    }

    #[test]
    fn a_fixed_offset_on_an_external_tensor_is_refused() {
        let mut tensors = tensors();
        tensors[0].fixed_offset = RSome(32);
        let error =
            ExternalTensors::resolve("m.json", &tensors, vec![true, false, false, false, false])
                .unwrap_err();
        assert!(
            error.message.contains("'in' (input) is external"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("arena offset 32"),
            "{}",
            error.message
        );
    }
}
