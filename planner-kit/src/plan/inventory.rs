//! The one pass over the request: validation, and the lists of tensors by role and memory
//! that the later passes work from ([`Inventory`]).

use super::invalid;
use crate::Buffer;
use memplan_plugin_api::{ArenaRole, PlanError, PlanRequest, TensorRequest};

/// What the one pass over the request (`validate`) finds. With a million tensors the
/// request is over 100 MB, and every pass over it costs as much as a good part of the
/// packing, so the later passes work from these lists.
pub(super) struct Inventory {
    /// The tensors that take space (not aliases, not empty), by role, in tensor order.
    pub(super) constant: Vec<u32>,
    pub(super) persistent: Placeables,
    pub(super) scratch: Placeables,
    /// Empty tensors (not aliases), bound without space.
    pub(super) empty: Vec<u32>,
    /// Aliases, bound to their root's bytes.
    pub(super) aliases: Vec<u32>,
}

/// The tensors of a role the kit spills between memories (persistent or scratch) that take
/// space, in tensor order.
#[derive(Default)]
pub(super) struct Placeables {
    /// Tensors the request pins: to a memory, or at a fixed offset.
    pub(super) pinned: Vec<u32>,
    /// Tensors free to go to any memory.
    pub(super) free: Vec<u32>,
    /// The buffers of `free`, one each, built in the same pass: when they all go to one
    /// arena (the usual case) the packer gets these without another pass over the request.
    pub(super) free_buffers: Vec<Buffer>,
}

impl Placeables {
    pub(super) fn with_capacity(tensors: usize) -> Placeables {
        Placeables {
            pinned: Vec::new(),
            free: Vec::with_capacity(tensors),
            free_buffers: Vec::with_capacity(tensors),
        }
    }
}

impl Inventory {
    pub(super) fn with_capacity(tensors: usize) -> Inventory {
        Inventory {
            // Room that is never written costs address space only.
            constant: Vec::with_capacity(tensors),
            persistent: Placeables::with_capacity(tensors),
            scratch: Placeables::with_capacity(tensors),
            empty: Vec::new(),
            aliases: Vec::new(),
        }
    }

    /// The persistent or scratch tensors to place; taken, as the caller places them.
    pub(super) fn take_placeables(&mut self, role: ArenaRole) -> Placeables {
        match role {
            ArenaRole::Persistent => std::mem::take(&mut self.persistent),
            ArenaRole::Scratch => std::mem::take(&mut self.scratch),
            ArenaRole::Constant => unreachable!("constants do not spill"),
        }
    }
}

/// The packer's view of `tensor`.
pub(super) fn buffer_of(tensor: &TensorRequest) -> Buffer {
    Buffer {
        size: tensor.size,
        alignment: tensor.alignment,
        lifetime: tensor.lifetime,
        fixed_offset: tensor.fixed_offset.into_option().into(),
    }
}

/// Rejects requests the passes cannot honour, naming the tensor or memory, and takes the
/// [`Inventory`], in one pass.
pub(super) fn validate(request: &PlanRequest) -> Result<Inventory, PlanError> {
    let mut inventory = Inventory::with_capacity(request.tensors.len());
    let memories = &request.memories;
    if memories.is_empty() && !request.tensors.is_empty() {
        return Err(invalid("the request lists tensors but no memories".into()));
    }
    for memory in memories.iter() {
        if !memory.arena_alignment.is_power_of_two() {
            return Err(invalid(format!(
                "memory {}: arena alignment {} is not a power of two",
                memory.name, memory.arena_alignment
            )));
        }
    }
    let memory_index = |tensor: &str, what: &str, index: u32| -> Result<usize, PlanError> {
        if (index as usize) < memories.len() {
            Ok(index as usize)
        } else {
            Err(invalid(format!(
                "tensor {tensor}: {what} index {index} is out of range ({} memories)",
                memories.len()
            )))
        }
    };
    for (index, tensor) in request.tensors.iter().enumerate() {
        let id = tensor.id.as_str();
        if !tensor.alignment.is_power_of_two() {
            return Err(invalid(format!(
                "tensor {id}: alignment {} is not a power of two",
                tensor.alignment
            )));
        }
        if let Some(offset) = tensor.fixed_offset.into_option() {
            // Packers add sizes to fixed offsets (and `FixedOffset` can then keep u64::MAX
            // for "none").
            if offset.checked_add(tensor.size).is_none() {
                return Err(invalid(format!(
                    "tensor {id}: fixed offset {offset} plus its {} bytes ends past 64 bits",
                    tensor.size
                )));
            }
        }
        if tensor.lifetime.first > tensor.lifetime.last {
            return Err(invalid(format!(
                "tensor {id}: lifetime [{}, {}] ends before it starts",
                tensor.lifetime.first, tensor.lifetime.last
            )));
        }
        if let Some(alias) = tensor.alias_of.into_option() {
            match request.tensors.get(alias.root as usize) {
                None => {
                    return Err(invalid(format!(
                        "tensor {id}: alias root index {} is out of range",
                        alias.root
                    )))
                }
                Some(root) if root.alias_of.is_some() => {
                    return Err(invalid(format!(
                        "tensor {id}: alias root {} is itself an alias (the host resolves \
                         alias chains to their root)",
                        root.id
                    )))
                }
                Some(_) => {}
            }
            inventory.aliases.push(index as u32);
            continue;
        }
        let memory = match tensor.memory.into_option() {
            Some(index) => Some(memory_index(id, "memory", index)?),
            None => None,
        };
        match tensor.kind.role() {
            ArenaRole::Constant => {
                let Some(destination) = memory else {
                    return Err(invalid(format!(
                        "constant tensor {id} has no destination memory"
                    )));
                };
                if let Some(source) = tensor.source_memory.into_option() {
                    let source = memory_index(id, "source memory", source)?;
                    if source != destination && !memories[destination].writable {
                        return Err(invalid(format!(
                            "constant tensor {id} is staged from {} into {}, which is not \
                             writable",
                            memories[source].name, memories[destination].name
                        )));
                    }
                }
            }
            ArenaRole::Scratch | ArenaRole::Persistent => {
                if let Some(index) = memory {
                    if !memories[index].writable {
                        return Err(invalid(format!(
                            "{} tensor {id} is placed in {}, which is not writable",
                            tensor.kind.as_str(),
                            memories[index].name
                        )));
                    }
                }
            }
        }
        let index = index as u32;
        let placeables = match tensor.kind.role() {
            _ if tensor.size == 0 => {
                inventory.empty.push(index);
                continue;
            }
            ArenaRole::Constant => {
                inventory.constant.push(index);
                continue;
            }
            ArenaRole::Persistent => &mut inventory.persistent,
            ArenaRole::Scratch => &mut inventory.scratch,
        };
        if tensor.memory.is_none() && tensor.fixed_offset.is_none() {
            placeables.free.push(index);
            placeables.free_buffers.push(buffer_of(tensor));
        } else {
            placeables.pinned.push(index);
        }
    }
    Ok(inventory)
}
