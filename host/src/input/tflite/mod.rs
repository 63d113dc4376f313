//! Reader for TFLite models (`.tflite` flatbuffers), with the tensor lifetimes TFLite Micro
//! derives, so that `memplan plan model.tflite` gives numbers comparable with TFLite Micro's.
//!
//! What the reader produces ([`Model`]):
//! - tensors of subgraph 0 and of every subgraph its control-flow operators run (CALL_ONCE
//!   init subgraphs; IF and WHILE branches are walked the same way, as TFLite Micro does);
//!   ids are the TFLite tensor indices (`"12"`; `"2:5"` for tensor 5 of subgraph 2), names
//!   come from the model;
//! - constant tensors (their buffer has bytes, inside the flatbuffer or at `Buffer.offset`
//!   in the file) are `Constant` with those bytes, their size the byte count; a tensor whose
//!   buffer an earlier tensor already uses is a view of it (`alias_of`, offset 0), so
//!   shared bytes are stored, and copied, once;
//! - variable tensors are `Persistent` (TFLite Micro keeps them outside its planned arena);
//! - every other tensor that the run touches is `Input`/`Output` (subgraph 0's graph inputs
//!   and outputs) or `Intermediate`, with the explicit lifetime of [`lifetimes`] and its
//!   size rounded up to 16 bytes, TFLite Micro's arena alignment (always; the rounding is
//!   what makes the figures comparable). Tensors of size 0 stay 0;
//! - tensors the run never touches are left out of the model: TFLite Micro does not plan
//!   them, and with no use there is no lifetime to give them;
//! - constant and persistent tensors live the whole run, `[0, last step]`;
//! - `operators` lists the operators in the order they run, those of invoked subgraphs
//!   inline; with control flow an operator's step is not its position, one more reason the
//!   lifetimes are explicit (`num_steps` = last step + 1);
//! - an `OfflineMemoryAllocation` metadata entry (offsets planned ahead of time, TFLite
//!   Micro's format) becomes `fixed_offset` of the scratch tensors it places.
//!
//! Every tensor asks for 16-byte alignment, as TFLite Micro's arena and the flatbuffer's
//! constant buffers (`force_align: 16`) give it.
//!
//! Malformed or hostile files are refused with an input error (exit 2) that says what is
//! wrong: not a TFLite file, failed flatbuffer verification, an index out of range, or a
//! feature this reader does not support. The entry for fuzzing is [`read_tflite_bytes`].
//!
//! Memory stays proportional to the file. Flatbuffers let one table, string or vector be
//! referenced from many places, so a small file can describe a huge model (one long name
//! shared by thousands of tensors, one subgraph invoked exponentially often). Converters
//! write each tensor, operator, name and buffer once, so the reader refuses files that, read
//! entry by entry, describe much more than their own size (`Reader::take`), or whose
//! control flow runs far more steps than the file has operators (`Reader::work_limit`).

mod lifetimes;
mod schema;
mod vocabulary;

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::collections::hash_map::{Entry, HashMap};
use std::path::{Path, PathBuf};

use memplan_plugin_api::bounds::align_up;

use crate::error::{Error, Result};
use crate::input::model::{Lifetime, Model, ModelAlias, Operator, Tensor, TensorKind};
use lifetimes::{OperatorFlow, SubgraphFlow, Walk, WalkError};
use schema::{builtin, element, Tables};

/// TFLite Micro's arena alignment: every planned size is rounded up to it.
pub const TFLM_ALIGNMENT: u64 = 16;

/// How many bytes the reader may take from the file, per byte of the file, counting each
/// read of an entry: every tensor, operator, operator input and output (4 bytes, the offset
/// or index naming it) and every name and constant buffer copied into the model. A file as
/// converters write it stores each of these once, in distinct bytes, so it takes at most its
/// own size; the slack covers the builtin operator names, which are not in the file.
const TAKEN_PER_FILE_BYTE: u64 = 2;
/// Bytes any file may take, so that tiny hand-made models are never refused.
const TAKEN_FLOOR: u64 = 4096;

/// The metadata name under which TFLite Micro finds offline-planned arena offsets.
const OFFLINE_PLAN_METADATA: &[u8] = b"OfflineMemoryAllocation";

/// Reads the `.tflite` model at `path`.
pub fn read_tflite(path: &Path) -> Result<Model> {
    let bytes = std::fs::read(path)
        .map_err(|err| Error::input(format!("{}: cannot read the model: {err}", path.display())))?;
    read_tflite_bytes(&bytes, path)
}

/// Reads a `.tflite` model from its bytes; `path` only names the model in messages and in
/// [`Model::path`]. Never panics, whatever the bytes.
pub fn read_tflite_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
    let reader = Reader {
        bytes,
        path,
        taken: Cell::new(0),
    };
    reader.read()
}

struct Reader<'a> {
    bytes: &'a [u8],
    path: &'a Path,
    /// Bytes taken from the file so far, see [`Reader::take`].
    taken: Cell<u64>,
}

/// A tensor as read from the flatbuffer, before lifetimes.
struct TensorRecord<'a> {
    name: String,
    type_code: i8,
    shape: Option<flatbuffers::Vector<'a, i32>>,
    storage: Storage<'a>,
}

enum Storage<'a> {
    /// Bytes known at compile time, from buffer `buffer`.
    Constant { buffer: u32, bytes: &'a [u8] },
    /// `is_variable`: state kept by the runtime across invocations.
    Variable,
    /// Planned in the arena.
    Arena,
}

/// A subgraph's tensors and operator names; its data flow is kept apart, in a
/// [`SubgraphFlow`], for the lifetime walk.
struct SubgraphRecord<'a> {
    tensors: Vec<TensorRecord<'a>>,
    operator_names: Vec<String>,
}

impl<'a> Reader<'a> {
    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::input(format!("{}: {message}", self.path.display()))
    }

    /// Counts `bytes` more taken from the file (before they are copied), and refuses the file
    /// once it has given more than [`TAKEN_PER_FILE_BYTE`] times its size: only tables
    /// shared on purpose get there, and reading on would use memory out of proportion to
    /// the file.
    fn take(&self, bytes: usize) -> Result<()> {
        let taken = self.taken.get().saturating_add(bytes as u64);
        self.taken.set(taken);
        let limit = TAKEN_PER_FILE_BYTE
            .saturating_mul(self.bytes.len() as u64)
            .saturating_add(TAKEN_FLOOR);
        if taken > limit {
            return Err(self.error(format!(
                "unsupported: the file's tables are shared so that, read entry by entry, it \
                 describes more than {limit} bytes of tensors, operators, names and constant \
                 data ({TAKEN_PER_FILE_BYTE} times its size); converters write each once, so \
                 the file was crafted or damaged"
            )));
        }
        Ok(())
    }

    /// Steps and tensor uses the lifetime walk may take: a quarter of the file's size (each
    /// step and use costs the file at least 4 bytes when no subgraph runs more than once),
    /// plus a floor for tiny hand-made models. The walk caps it at [`lifetimes::MAX_WORK`].
    fn work_limit(&self) -> u64 {
        const WORK_FLOOR: u64 = 1024;
        (self.bytes.len() as u64 / 4).saturating_add(WORK_FLOOR)
    }

    fn read(&self) -> Result<Model> {
        self.check_identifier()?;
        let root = schema::verified_model(self.bytes).map_err(|err| {
            // The verifier's message is several lines (the error, then its trace).
            let detail: Vec<String> = err
                .to_string()
                .lines()
                .map(|line| line.trim().trim_end_matches('.'))
                .filter(|line| !line.is_empty())
                .map(str::to_string)
                .collect();
            self.error(format!(
                "the TFLite flatbuffer failed verification: {}; the file is damaged or \
                 truncated, re-export it from the converter",
                detail.join(", ")
            ))
        })?;
        let buffers = root.buffers();
        let operator_names = self.operator_names(&root)?;
        let subgraphs = root
            .subgraphs()
            .filter(|subgraphs| !subgraphs.is_empty())
            .ok_or_else(|| self.error("the model has no subgraph to plan"))?;
        let (records, flows): (Vec<_>, Vec<_>) = subgraphs
            .iter()
            .enumerate()
            .map(|(index, subgraph)| {
                self.subgraph_record(index, subgraph, subgraphs.len(), buffers, &operator_names)
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let offline_offsets = self.offline_offsets(&root, &records)?;
        self.build_model(&records, &flows, offline_offsets)
    }

    fn check_identifier(&self) -> Result<()> {
        let found = self.bytes.get(4..8).ok_or_else(|| {
            self.error(format!(
                "not a TFLite model: the file has {} bytes, too few for a flatbuffer header",
                self.bytes.len()
            ))
        })?;
        if found != schema::FILE_IDENTIFIER {
            return Err(self.error(format!(
                "not a TFLite model: file identifier {:?}, expected \"TFL3\" at bytes 4..8",
                String::from_utf8_lossy(found)
            )));
        }
        Ok(())
    }

    /// Name of each operator code: the builtin name, or the custom code for custom ops. Also
    /// the builtin code, which decides control flow.
    fn operator_names(&self, root: &schema::Model<'a>) -> Result<Vec<(i32, String)>> {
        let Some(codes) = root.operator_codes() else {
            return Ok(Vec::new());
        };
        codes
            .iter()
            .map(|code| {
                let builtin = code.builtin_code();
                let name = match (
                    vocabulary::builtin_operator_name(builtin),
                    code.custom_code(),
                ) {
                    (Some("CUSTOM"), Some(custom)) => {
                        self.take(4 + custom.len())?;
                        String::from_utf8_lossy(custom).into_owned()
                    }
                    (Some(name), _) => name.to_string(),
                    (None, _) => format!("BUILTIN_{builtin}"),
                };
                Ok((builtin, name))
            })
            .collect()
    }

    fn subgraph_record(
        &self,
        index: usize,
        subgraph: schema::SubGraph<'a>,
        subgraph_count: usize,
        buffers: Option<Tables<'a, schema::Buffer<'a>>>,
        operator_names: &[(i32, String)],
    ) -> Result<(SubgraphRecord<'a>, SubgraphFlow)> {
        let tensors = match subgraph.tensors() {
            Some(tensors) => tensors
                .iter()
                .enumerate()
                .map(|(tensor_index, tensor)| {
                    self.tensor_record(index, tensor_index, tensor, buffers)
                })
                .collect::<Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        let tensor_count = tensors.len();
        let tensor_index = |value: i32, what: &dyn Fn() -> String| -> Result<usize> {
            usize::try_from(value)
                .ok()
                .filter(|&tensor| tensor < tensor_count)
                .ok_or_else(|| {
                    self.error(format!(
                        "subgraph {index}: {} is tensor {value}, but the subgraph has \
                         {tensor_count} tensors",
                        what()
                    ))
                })
        };
        let graph_tensors = |list: Option<flatbuffers::Vector<'a, i32>>, what: &str| {
            self.take(4 * list.map_or(0, |list| list.len()))?;
            list.iter()
                .flatten()
                .enumerate()
                .map(|(position, value)| tensor_index(value, &|| format!("{what} {position}")))
                .collect::<Result<Vec<_>>>()
        };
        let inputs = graph_tensors(subgraph.inputs(), "graph input")?;
        let outputs = graph_tensors(subgraph.outputs(), "graph output")?;

        let mut operators = Vec::new();
        let mut names = Vec::new();
        for (position, operator) in subgraph.operators().iter().flatten().enumerate() {
            let opcode = operator.opcode_index();
            let (builtin, name) = usize::try_from(opcode)
                .ok()
                .and_then(|opcode| operator_names.get(opcode))
                .ok_or_else(|| {
                    self.error(format!(
                        "subgraph {index}, operator {position}: operator code {opcode} is out \
                         of range (the model has {} operator codes)",
                        operator_names.len()
                    ))
                })?;
            let (input_count, output_count) = (
                operator.inputs().map_or(0, |list| list.len()),
                operator.outputs().map_or(0, |list| list.len()),
            );
            self.take(4 * (1 + input_count + output_count) + name.len())?;
            let place =
                |role: &str, slot: usize| format!("operator {position} ({name}) {role} {slot}");
            let inputs = operator
                .inputs()
                .iter()
                .flatten()
                .enumerate()
                .map(|(slot, value)| {
                    // -1 marks an omitted optional input (TFLite Micro skips every negative).
                    if value < 0 {
                        Ok(None)
                    } else {
                        tensor_index(value, &|| place("input", slot)).map(Some)
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            let outputs = operator
                .outputs()
                .iter()
                .flatten()
                .enumerate()
                .map(|(slot, value)| tensor_index(value, &|| place("output", slot)))
                .collect::<Result<Vec<_>>>()?;
            let invokes = self.invoked_subgraphs(index, position, *builtin, name, &operator)?;
            for &callee in &invokes {
                if callee >= subgraph_count {
                    return Err(self.error(format!(
                        "subgraph {index}, operator {position} ({name}) runs subgraph {callee}, \
                         but the model has {subgraph_count} subgraphs"
                    )));
                }
            }
            operators.push(OperatorFlow {
                inputs,
                outputs,
                invokes,
            });
            names.push(name.clone());
        }
        let record = SubgraphRecord {
            tensors,
            operator_names: names,
        };
        let flow = SubgraphFlow {
            tensor_count,
            inputs,
            outputs,
            operators,
        };
        Ok((record, flow))
    }

    /// The subgraphs a control-flow operator runs, in TFLite Micro's walk order.
    fn invoked_subgraphs(
        &self,
        subgraph: usize,
        position: usize,
        builtin: i32,
        name: &str,
        operator: &schema::Operator<'a>,
    ) -> Result<Vec<usize>> {
        let missing = || {
            self.error(format!(
                "subgraph {subgraph}, operator {position} ({name}) has no {name} options naming \
                 the subgraph it runs"
            ))
        };
        let indices = match builtin {
            builtin::CALL_ONCE => {
                let options = operator.call_once_options().ok_or_else(missing)?;
                vec![options.init_subgraph_index()]
            }
            builtin::IF => {
                let options = operator.if_options().ok_or_else(missing)?;
                vec![options.then_subgraph_index(), options.else_subgraph_index()]
            }
            builtin::WHILE => {
                let options = operator.while_options().ok_or_else(missing)?;
                vec![options.cond_subgraph_index(), options.body_subgraph_index()]
            }
            _ => return Ok(Vec::new()),
        };
        indices
            .into_iter()
            .map(|value| {
                usize::try_from(value).map_err(|_| {
                    self.error(format!(
                        "subgraph {subgraph}, operator {position} ({name}) runs subgraph \
                         {value}, which does not exist"
                    ))
                })
            })
            .collect()
    }

    fn tensor_record(
        &self,
        subgraph: usize,
        index: usize,
        tensor: schema::Tensor<'a>,
        buffers: Option<Tables<'a, schema::Buffer<'a>>>,
    ) -> Result<TensorRecord<'a>> {
        self.take(4 + tensor.name().map_or(0, <[u8]>::len))?;
        let name = tensor
            .name()
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .unwrap_or_else(|| tensor_id(subgraph, index));
        let storage = if tensor.is_variable() {
            Storage::Variable
        } else {
            match self.buffer_bytes(tensor.buffer(), buffers, || {
                format!("subgraph {subgraph}, tensor {index} ({name})")
            })? {
                Some(bytes) => Storage::Constant {
                    buffer: tensor.buffer(),
                    bytes,
                },
                None => Storage::Arena,
            }
        };
        Ok(TensorRecord {
            name,
            type_code: tensor.tensor_type(),
            shape: tensor.shape(),
            storage,
        })
    }

    /// The bytes of buffer `index`, `None` when it holds none (buffer 0 is the empty
    /// sentinel by convention). Large models keep bytes outside the flatbuffer: `offset`
    /// (when greater than 1) and `size` locate them from the start of the file.
    fn buffer_bytes(
        &self,
        index: u32,
        buffers: Option<Tables<'a, schema::Buffer<'a>>>,
        owner: impl Fn() -> String,
    ) -> Result<Option<&'a [u8]>> {
        let buffer_count = buffers.map_or(0, |buffers| buffers.len());
        let buffer = buffers
            .and_then(|buffers| element(buffers, index as usize))
            .ok_or_else(|| {
                self.error(format!(
                    "{}: buffer {index} is out of range (the model has {buffer_count} buffers)",
                    owner()
                ))
            });
        // Buffer 0 is allowed to be missing from a model without buffers.
        let buffer = match buffer {
            Ok(buffer) => buffer,
            Err(_) if index == 0 => return Ok(None),
            Err(err) => return Err(err),
        };
        let bytes = if buffer.offset() > 1 {
            let (offset, size) = (buffer.offset(), buffer.size());
            let range = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(size).ok())
                .and_then(|(start, size)| Some(start..start.checked_add(size)?))
                .and_then(|range| self.bytes.get(range));
            range.ok_or_else(|| {
                self.error(format!(
                    "{}: buffer {index} lies at bytes {offset}..{} of the file, past its end \
                     ({} bytes); the file is truncated",
                    owner(),
                    offset.saturating_add(size),
                    self.bytes.len()
                ))
            })?
        } else {
            buffer.data().unwrap_or_default()
        };
        Ok((!bytes.is_empty()).then_some(bytes))
    }

    /// Offsets from an `OfflineMemoryAllocation` metadata entry: per tensor of every
    /// subgraph, in subgraph order, an arena offset or -1 for "plan it online". The buffer
    /// holds little-endian int32 words: version, subgraph, tensor count, then the offsets.
    fn offline_offsets(
        &self,
        root: &schema::Model<'a>,
        records: &[SubgraphRecord<'a>],
    ) -> Result<Option<Vec<i32>>> {
        let Some(entry) = root
            .metadata()
            .iter()
            .flatten()
            .find(|entry| entry.name() == Some(OFFLINE_PLAN_METADATA))
        else {
            return Ok(None);
        };
        let what = || "metadata OfflineMemoryAllocation".to_string();
        let bytes = self.buffer_bytes(entry.buffer(), root.buffers(), what)?;
        let words: Vec<i32> = bytes
            .unwrap_or_default()
            .chunks_exact(4)
            .map(|word| i32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect();
        let tensor_count: usize = records.iter().map(|record| record.tensors.len()).sum();
        let listed = words.get(2).copied().unwrap_or(-1);
        let offsets = words.get(3..).unwrap_or_default();
        if usize::try_from(listed).ok() != Some(tensor_count) || offsets.len() < tensor_count {
            return Err(self.error(format!(
                "metadata OfflineMemoryAllocation lists {listed} tensor offsets ({} present), \
                 but the model has {tensor_count} tensors",
                offsets.len()
            )));
        }
        Ok(Some(offsets[..tensor_count].to_vec()))
    }

    fn walk(&self, flows: &[SubgraphFlow]) -> Result<Walk> {
        lifetimes::walk(flows, self.work_limit()).map_err(|err| {
            self.error(match err {
                WalkError::Cycle { subgraph } => format!(
                    "unsupported: subgraph {subgraph} runs itself through control-flow operators \
                     (CALL_ONCE, IF, WHILE), so its lifetimes never end"
                ),
                WalkError::TooDeep => format!(
                    "unsupported: control-flow operators nest more than {} subgraphs deep",
                    lifetimes::MAX_NESTING
                ),
                WalkError::TooLarge => format!(
                    "unsupported: running every subgraph its control-flow operators invoke \
                     takes more than {} steps and tensor uses (a quarter of the file's size, \
                     at most {})",
                    self.work_limit().min(lifetimes::MAX_WORK),
                    lifetimes::MAX_WORK
                ),
            })
        })
    }

    fn build_model(
        &self,
        records: &[SubgraphRecord<'a>],
        flows: &[SubgraphFlow],
        offline_offsets: Option<Vec<i32>>,
    ) -> Result<Model> {
        let walk = self.walk(flows)?;
        let whole_run = Lifetime::new(0, walk.last_step);
        let mut kinds = vec![TensorKind::Intermediate; records[0].tensors.len()];
        // Outputs first, so that a tensor both input and output counts as an input.
        for &tensor in &flows[0].outputs {
            kinds[tensor] = TensorKind::Output;
        }
        for &tensor in &flows[0].inputs {
            kinds[tensor] = TensorKind::Input;
        }

        let mut tensors: Vec<Tensor> = Vec::new();
        // Model index of each (subgraph, tensor) kept.
        let mut model_index: Vec<Vec<Option<u32>>> = Vec::with_capacity(records.len());
        // The first constant tensor of each buffer: later ones become views of it, so shared
        // bytes are stored (and copied) once.
        let mut buffer_owner: HashMap<u32, u32> = HashMap::new();
        let mut global_offset = 0usize;
        for (subgraph, record) in records.iter().enumerate() {
            let mut indices = vec![None; record.tensors.len()];
            for (index, tensor) in record.tensors.iter().enumerate() {
                if !walk.reached[subgraph] {
                    continue;
                }
                let id = tensor_id(subgraph, index);
                let mut model_tensor = match tensor.storage {
                    Storage::Constant { buffer, bytes } => {
                        let mut constant =
                            Tensor::new(id, TensorKind::Constant, bytes.len() as u64);
                        match buffer_owner.entry(buffer) {
                            Entry::Occupied(owner) => {
                                constant.alias_of = Some(ModelAlias {
                                    target: *owner.get(),
                                    offset: 0,
                                });
                            }
                            Entry::Vacant(slot) => {
                                self.take(bytes.len())?;
                                slot.insert(tensors.len() as u32);
                                constant.data = Some(bytes.to_vec());
                            }
                        }
                        constant.lifetime = Some(whole_run);
                        constant
                    }
                    Storage::Variable => {
                        let size = self.planned_size(subgraph, index, tensor)?;
                        let mut variable = Tensor::new(id, TensorKind::Persistent, size);
                        variable.lifetime = Some(whole_run);
                        variable
                    }
                    Storage::Arena => {
                        // Never touched by the run: TFLite Micro does not plan it.
                        let Some(lifetime) = walk.lifetimes[subgraph][index] else {
                            continue;
                        };
                        let kind = if subgraph == 0 {
                            kinds[index]
                        } else {
                            TensorKind::Intermediate
                        };
                        let size = self.planned_size(subgraph, index, tensor)?;
                        let mut scratch = Tensor::new(id, kind, size);
                        scratch.lifetime = Some(lifetime);
                        scratch.fixed_offset = offline_offsets
                            .as_ref()
                            .map(|offsets| offsets[global_offset + index])
                            .and_then(|offset| u64::try_from(offset).ok());
                        scratch
                    }
                };
                model_tensor.name = tensor.name.clone();
                model_tensor.element_size =
                    vocabulary::tensor_type(tensor.type_code).1.unwrap_or(1);
                model_tensor.alignment = Some(TFLM_ALIGNMENT);
                indices[index] = Some(tensors.len() as u32);
                tensors.push(model_tensor);
            }
            global_offset += record.tensors.len();
            model_index.push(indices);
        }

        // Every tensor an operator or a graph names was touched by the walk, or is constant
        // or variable, and so was kept.
        let kept = |subgraph: usize, tensor: usize| -> Result<u32> {
            model_index[subgraph][tensor].ok_or_else(|| {
                Error::internal(format!(
                    "{}: tensor {} was dropped although the graph uses it",
                    self.path.display(),
                    tensor_id(subgraph, tensor)
                ))
            })
        };
        let kept_all = |subgraph: usize, list: &mut dyn Iterator<Item = usize>| {
            list.map(|tensor| kept(subgraph, tensor))
                .collect::<Result<Vec<u32>>>()
        };
        let operators = walk
            .order
            .iter()
            .map(|&(subgraph, position)| {
                let flow = &flows[subgraph].operators[position];
                // The walk bounds the steps; a long name runs into the budget instead.
                self.take(records[subgraph].operator_names[position].len())?;
                Ok(Operator {
                    op_type: records[subgraph].operator_names[position].clone(),
                    inputs: kept_all(subgraph, &mut flow.inputs.iter().flatten().copied())?,
                    outputs: kept_all(subgraph, &mut flow.outputs.iter().copied())?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Model {
            path: PathBuf::from(self.path),
            tensors,
            operators,
            inputs: kept_all(0, &mut flows[0].inputs.iter().copied())?,
            outputs: kept_all(0, &mut flows[0].outputs.iter().copied())?,
            num_steps: Some(walk.last_step + 1),
        })
    }

    /// Bytes TFLite Micro reserves for a non-constant tensor: elements (the product of the
    /// shape, 1 for a scalar) times the element size, rounded up to [`TFLM_ALIGNMENT`].
    fn planned_size(&self, subgraph: usize, index: usize, tensor: &TensorRecord) -> Result<u64> {
        let place = || format!("tensor {} ({})", tensor_id(subgraph, index), tensor.name);
        let (type_name, element_size) = vocabulary::tensor_type(tensor.type_code);
        let element_size = element_size.ok_or_else(|| {
            self.error(format!(
                "unsupported: {} has type {type_name} (code {}), which has no fixed size to \
                 plan",
                place(),
                tensor.type_code
            ))
        })?;
        let mut bytes = element_size;
        for dimension in tensor.shape.iter().flatten() {
            let dimension = u64::try_from(dimension).map_err(|_| {
                self.error(format!(
                    "unsupported: {} has a dynamic shape (dimension {dimension}); give the \
                     model fixed shapes before planning",
                    place()
                ))
            })?;
            bytes = bytes
                .checked_mul(dimension)
                .ok_or_else(|| self.error(format!("{} is larger than 2^64 bytes", place())))?;
        }
        if bytes > u64::MAX - TFLM_ALIGNMENT {
            return Err(self.error(format!("{} is larger than 2^64 bytes", place())));
        }
        Ok(align_up(bytes, TFLM_ALIGNMENT))
    }
}

/// The id of tensor `index` of `subgraph`: its TFLite index, prefixed by the subgraph for
/// subgraphs other than 0.
fn tensor_id(subgraph: usize, index: usize) -> String {
    if subgraph == 0 {
        index.to_string()
    } else {
        format!("{subgraph}:{index}")
    }
}
