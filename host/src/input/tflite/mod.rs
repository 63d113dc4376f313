//! Reader for TFLite models (`.tflite` flatbuffers), with the tensor lifetimes TFLite Micro
//! derives, so that `memplan plan model.tflite` gives numbers comparable with TFLite Micro's.
//!
//! What the reader produces: a [`Model`] whose lifetime rule is TFLite Micro's, carrying the
//! graph ([`TfliteGraph`]): every subgraph's tensors (name, type, shape, and storage: constant
//! bytes, variable, or arena), operators with their inputs, outputs and the subgraphs
//! control-flow operators run (CALL_ONCE init; IF then/else; WHILE cond/body), and the
//! offsets of an `OfflineMemoryAllocation` metadata entry. Which tensors TFLite Micro plans,
//! their lifetimes and their arena sizes (rounded to 16 bytes) are TFLite Micro's rule, which
//! analysis applies (`analyze::lifetimes::tflite_micro`).
//!
//! Malformed or hostile files are refused with an input error (exit 2) that says what is
//! wrong: not a TFLite file, failed flatbuffer verification, an index out of range, or a
//! feature this reader does not support. The entry for fuzzing is [`read_tflite_bytes`].
//!
//! Memory stays proportional to the file. Flatbuffers let one table, string or vector be
//! referenced from many places, so a small file can describe a huge model (one long name
//! shared by thousands of tensors, one subgraph invoked exponentially often). Converters
//! write each tensor, operator, name and buffer once, so the reader refuses files that, read
//! entry by entry, describe much more than their own size ([`CopyBudget`], which analysis
//! goes on charging), and bounds the steps the lifetime walk may take by the file's size
//! (`Reader::work_limit`).

mod schema;
mod vocabulary;

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod test_model;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::input::graph::{
    CopyBudget, GraphStorage, GraphSubgraph, GraphTensor, OperatorFacts, OperatorFlow,
    SubgraphFlow, TfliteGraph,
};
use crate::input::model::{LifetimeRule, Model};
use schema::{builtin, element, Tables};

/// How many bytes the reader may take from the file, per byte of the file, counting each
/// read of an entry: every tensor, operator, operator input and output (4 bytes, the offset
/// or index naming it) and every name and constant buffer copied into the model. A file as
/// converters write it stores each of these once, in distinct bytes, so it takes at most its
/// own size; the slack covers the builtin operator names, which are not in the file.
const TAKEN_PER_FILE_BYTE: u64 = 2;
/// Bytes any file may take, so that tiny hand-made models are never refused.
const TAKEN_FLOOR: u64 = 4096;

/// The metadata name under which TFLite Micro finds offline-planned arena offsets.
pub(crate) const OFFLINE_PLAN_METADATA: &[u8] = b"OfflineMemoryAllocation";

/// Reads the `.tflite` model at `path`. The 8-byte header is checked before the rest is read,
/// so that a large file that is not a TFLite model is refused at once.
pub fn read_tflite(path: &Path) -> Result<Model> {
    use crate::input::source::{open_regular_file, read_capped, MAX_MODEL_FILE_BYTES};
    use std::io::Read;
    let what = "the model";
    let (mut file, len) = open_regular_file(path, what, MAX_MODEL_FILE_BYTES)?;
    let cannot = |err: std::io::Error| {
        Error::input(format!("{}: cannot read the model: {err}", path.display()))
    };
    let mut bytes = Vec::new();
    file.by_ref()
        .take(8)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() == 8 && &bytes[4..8] != schema::FILE_IDENTIFIER {
        // The reader's own message for a wrong identifier, from the header alone.
        return read_tflite_bytes(&bytes, path);
    }
    bytes.reserve(usize::try_from(len).unwrap_or(0));
    read_capped(file, &mut bytes, path, what, MAX_MODEL_FILE_BYTES)?;
    read_tflite_bytes(&bytes, path)
}

/// Reads a `.tflite` model from its bytes; `path` only names the model in messages and in
/// [`Model::path`]. Never panics, whatever the bytes.
pub fn read_tflite_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
    let reader = Reader {
        bytes,
        path,
        budget: Cell::new(CopyBudget::new(
            bytes.len(),
            TAKEN_PER_FILE_BYTE,
            TAKEN_FLOOR,
        )),
        buffers: RefCell::new(BTreeMap::new()),
    };
    reader.read()
}

struct Reader<'a> {
    bytes: &'a [u8],
    path: &'a Path,
    /// What may still be copied out of the file, see [`CopyBudget`].
    budget: Cell<CopyBudget>,
    /// Constant buffers copied so far, by index (each once, however many tensors use it).
    buffers: RefCell<BTreeMap<u32, Vec<u8>>>,
}

impl<'a> Reader<'a> {
    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::input(format!("{}: {message}", self.path.display()))
    }

    /// Counts `bytes` more copied out of the file (before they are copied), see [`CopyBudget`].
    fn take(&self, bytes: usize) -> Result<()> {
        let mut budget = self.budget.get();
        let taken = budget.take(bytes, self.path);
        self.budget.set(budget);
        taken
    }

    /// Steps and tensor uses the lifetime walk may take: a quarter of the file's size (each
    /// step and use costs the file at least 4 bytes when no subgraph runs more than once),
    /// plus a floor for tiny hand-made models. The walk caps it further.
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
        let subgraphs = subgraphs
            .iter()
            .enumerate()
            .map(|(index, subgraph)| {
                self.subgraph_record(index, subgraph, subgraphs.len(), buffers, &operator_names)
            })
            .collect::<Result<Vec<_>>>()?;
        let offline_offsets = self.offline_offsets(&root, &subgraphs)?;
        let graph = TfliteGraph {
            subgraphs,
            buffers: self.buffers.take(),
            offline_offsets,
            work_limit: self.work_limit(),
            copy_budget: self.budget.get(),
            file: self.bytes.to_vec(),
            offline_plan_under_check: false,
        };
        Ok(Model {
            path: PathBuf::from(self.path),
            rule: LifetimeRule::TfliteMicro(Box::new(graph)),
            ..Model::default()
        })
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
    ) -> Result<GraphSubgraph> {
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
        let mut facts = Vec::new();
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
            facts.push(self.operator_facts(*builtin, &operator)?);
        }
        Ok(GraphSubgraph {
            tensors,
            operator_names: names,
            operator_facts: facts,
            flow: SubgraphFlow {
                tensor_count,
                inputs,
                outputs,
                operators,
            },
        })
    }

    /// What the order stage needs of an operator: whether memplan knows it, and the resource
    /// variable a VAR_HANDLE names.
    fn operator_facts(
        &self,
        builtin: i32,
        operator: &schema::Operator<'a>,
    ) -> Result<OperatorFacts> {
        let resource = match operator.var_handle_options() {
            Some(options) => {
                let (container, shared_name) = (
                    options.container().unwrap_or_default(),
                    options.shared_name().unwrap_or_default(),
                );
                self.take(container.len() + shared_name.len())?;
                Some(format!("{container}/{shared_name}"))
            }
            None => None,
        };
        Ok(OperatorFacts {
            unknown: builtin == builtin::CUSTOM
                || vocabulary::builtin_operator_name(builtin).is_none(),
            resource,
        })
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
    ) -> Result<GraphTensor> {
        let shape = tensor
            .shape()
            .map(|shape| shape.iter().collect::<Vec<i32>>());
        self.take(
            4 + tensor.name().map_or(0, <[u8]>::len) + 4 * shape.as_ref().map_or(0, Vec::len),
        )?;
        let name = tensor
            .name()
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .unwrap_or_else(|| tensor_id(subgraph, index));
        let storage = if tensor.is_variable() {
            GraphStorage::Variable
        } else {
            match self.buffer_bytes(tensor.buffer(), buffers, || {
                format!("subgraph {subgraph}, tensor {index} ({name})")
            })? {
                Some(bytes) => {
                    let buffer = tensor.buffer();
                    if !self.buffers.borrow().contains_key(&buffer) {
                        self.take(bytes.len())?;
                        self.buffers.borrow_mut().insert(buffer, bytes.to_vec());
                    }
                    GraphStorage::Constant { buffer }
                }
                None => GraphStorage::Arena,
            }
        };
        let (type_name, element_size) = vocabulary::tensor_type(tensor.tensor_type());
        Ok(GraphTensor {
            name,
            type_name,
            type_code: tensor.tensor_type(),
            element_size,
            shape,
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
        subgraphs: &[GraphSubgraph],
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
        let tensor_count: usize = subgraphs
            .iter()
            .map(|subgraph| subgraph.tensors.len())
            .sum();
        let listed = words.get(2).copied().unwrap_or(-1);
        let offsets = words.get(3..).unwrap_or_default();
        if usize::try_from(listed).ok() != Some(tensor_count) || offsets.len() < tensor_count {
            return Err(self.error(format!(
                "metadata OfflineMemoryAllocation lists {listed} tensor offsets ({} present), \
                 but the model has {tensor_count} tensors",
                offsets.len()
            )));
        }
        // TFLite Micro reads -1 as "plan it online" and any other value as an offset: a
        // negative one would put the tensor before the arena.
        let mut position = 0;
        for (subgraph, graph) in subgraphs.iter().enumerate() {
            for index in 0..graph.tensors.len() {
                let offset = offsets[position];
                if offset < -1 {
                    return Err(self.error(format!(
                        "metadata OfflineMemoryAllocation gives tensor {} ({}) offset {offset}; \
                         offsets are bytes from the arena start, or -1 to let TFLite Micro place \
                         the tensor (it would use {offset} as an offset, before the arena)",
                        tensor_id(subgraph, index),
                        graph.tensors[index].name
                    )));
                }
                position += 1;
            }
        }
        let version = words.first().copied();
        if !matches!(version, Some(0 | 1)) {
            // TFLite Micro ignores the word; Arm Vela writes 0, memplan 1; a tool that writes
            // another may mean another layout.
            tracing::warn!(
                "{}: metadata OfflineMemoryAllocation has version {} (expected 0 or 1); TFLite Micro \
                 ignores it, so memplan reads the offsets as TFLite Micro would",
                self.path.display(),
                version.map_or("none".to_string(), |word| word.to_string()),
            );
        }
        Ok(Some(offsets[..tensor_count].to_vec()))
    }
}

/// The id of tensor `index` of `subgraph`: its TFLite index, prefixed by the subgraph for
/// subgraphs other than 0.
pub(crate) fn tensor_id(subgraph: usize, index: usize) -> String {
    if subgraph == 0 {
        index.to_string()
    } else {
        format!("{subgraph}:{index}")
    }
}
