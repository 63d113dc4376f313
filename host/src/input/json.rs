//! Reader of memplan's model JSON, version 1 (docs/model-format.md).
//!
//! Built for million-tensor models: serde deserializes straight into typed documents (no
//! `serde_json::Value`), ids and base64 borrowed from the text, and each tensor object is
//! turned into a [`Tensor`] the moment it is parsed, so the raw tensor documents are never
//! held all at once. Ids are resolved through one hash map (a cheap non-cryptographic hash:
//! the keys are the user's own file). A second, linear pass resolves references, loads
//! `data_file` bytes and infers kinds.
//!
//! Syntax and type errors, and errors found while a tensor is parsed (duplicate id, bad dtype,
//! size overflow, bad base64, ...), carry the file, line and column; errors found afterwards
//! name the tensor (id and index) or the operator.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Component, Path, PathBuf};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::base64;
use crate::input::model::{
    Lifetime, LifetimeRule, Model, ModelAlias, Operator, Tensor, TensorKind, MAX_TENSOR_BYTES,
};
use crate::input::source::{parse_json, read_text, text_from_bytes, JsonId};

const WHAT: &str = "a memplan model JSON (docs/model-format.md)";

/// Reads a model JSON file.
pub fn read_model_json(path: &Path) -> Result<Model> {
    let text = read_text(path, WHAT)?;
    parse_model_json(path, &text)
}

/// Reads a model JSON from its bytes; `path` names it in messages and is where relative
/// `data_file` paths start. The entry for fuzzing: never panics, whatever the bytes.
pub fn read_model_json_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
    let text = text_from_bytes(path, bytes.to_vec(), WHAT)?;
    parse_model_json(path, &text)
}

fn parse_model_json(path: &Path, text: &str) -> Result<Model> {
    let doc: ModelDoc = parse_json(path, text, WHAT)?;
    build_model(path, doc)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelDoc<'a> {
    version: u32,
    #[serde(default, borrow)]
    #[allow(dead_code)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tensors: TensorList<'a>,
    #[serde(default, borrow)]
    operators: OperatorList<'a>,
    #[serde(default, borrow)]
    inputs: Vec<JsonId<'a>>,
    #[serde(default, borrow)]
    outputs: Vec<JsonId<'a>>,
}

/// `operators[3] (CONV_2D)` for messages.
fn describe(index: usize, op_type: &str) -> String {
    format!("operators[{index}] ({op_type})")
}

/// The `operators` array with every operator's input and output ids in one flat list, so
/// that they are resolved afterwards in one tight loop: independent hash lookups the CPU
/// overlaps, instead of one cache miss at a time between parsing steps. No vector per
/// operator until the [`Operator`]s are built.
#[derive(Default)]
struct OperatorList<'a> {
    types: Vec<Cow<'a, str>>,
    /// Input and output ids of all operators, in file order.
    ids: Vec<JsonId<'a>>,
    /// Per operator, where its inputs and its outputs are in `ids`.
    ranges: Vec<[std::ops::Range<usize>; 2]>,
}

impl<'de: 'a, 'a> Deserialize<'de> for OperatorList<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct ListVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ListVisitor<'a> {
            type Value = OperatorList<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of operator objects")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<OperatorList<'a>, A::Error> {
                let mut list = OperatorList::default();
                while seq
                    .next_element_seed(OperatorSeed { list: &mut list })?
                    .is_some()
                {}
                Ok(list)
            }
        }
        deserializer.deserialize_seq(ListVisitor(std::marker::PhantomData))
    }
}

/// One operator object, appended to an [`OperatorList`].
struct OperatorSeed<'l, 'a> {
    list: &'l mut OperatorList<'a>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for OperatorSeed<'_, 'a> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for OperatorSeed<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an operator object {\"type\", \"inputs\", \"outputs\"}")
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> std::result::Result<(), M::Error> {
        const FIELDS: &[&str] = &["type", "name", "inputs", "outputs"];
        let list = self.list;
        let mut op_type: Option<Cow<'a, str>> = None;
        let mut name_seen = false;
        let mut ranges: [Option<std::ops::Range<usize>>; 2] = [None, None];
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let slot = match key.as_ref() {
                "type" if op_type.is_none() => {
                    op_type = Some(map.next_value()?);
                    continue;
                }
                "name" if !name_seen => {
                    name_seen = true;
                    map.next_value::<Option<Cow<'de, str>>>()?;
                    continue;
                }
                "inputs" if ranges[0].is_none() => 0,
                "outputs" if ranges[1].is_none() => 1,
                "type" | "name" | "inputs" | "outputs" => {
                    return Err(de::Error::custom(format!("duplicate field `{key}`")))
                }
                other => return Err(de::Error::unknown_field(other, FIELDS)),
            };
            let start = list.ids.len();
            map.next_value_seed(IdsInto { ids: &mut list.ids })?;
            ranges[slot] = Some(start..list.ids.len());
        }
        list.types
            .push(op_type.ok_or_else(|| de::Error::missing_field("type"))?);
        let empty = list.ids.len()..list.ids.len();
        let [inputs, outputs] = ranges;
        list.ranges.push([
            inputs.unwrap_or_else(|| empty.clone()),
            outputs.unwrap_or(empty),
        ]);
        Ok(())
    }
}

/// A list of ids appended to a flat vector.
struct IdsInto<'v, 'a> {
    ids: &'v mut Vec<JsonId<'a>>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for IdsInto<'_, 'a> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for IdsInto<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of tensor ids")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(id) = seq.next_element::<JsonId<'a>>()? {
            self.ids.push(id);
        }
        Ok(())
    }
}

/// One tensor object as written; parsed and immediately converted (see [`TensorList`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorDoc<'a> {
    #[serde(borrow)]
    id: JsonId<'a>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    kind: Option<TensorKind>,
    #[serde(default, borrow)]
    dtype: Option<Cow<'a, str>>,
    #[serde(default)]
    shape: Option<ShapeProduct>,
    #[serde(default)]
    size: Option<ByteCount>,
    #[serde(default)]
    alignment: Option<u64>,
    #[serde(default, borrow)]
    alias_of: Option<JsonId<'a>>,
    #[serde(default)]
    alias_offset: Option<ByteCount>,
    #[serde(default)]
    fixed_offset: Option<ByteCount>,
    #[serde(default)]
    lifetime: Option<[u32; 2]>,
    #[serde(default, borrow)]
    data: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    data_file: Option<DataFileDoc<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DataFileDoc<'a> {
    #[serde(borrow)]
    path: Cow<'a, str>,
    #[serde(default)]
    offset: Option<ByteCount>,
    #[serde(default)]
    length: Option<ByteCount>,
}

/// A byte count or dimension: a non-negative integer. Its own type so that `-4` or `1.5`
/// get a message about sizes (with serde's line and column) rather than about `u64`.
#[derive(Clone, Copy, Debug)]
struct ByteCount(u64);

impl<'de> Deserialize<'de> for ByteCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = ByteCount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<ByteCount, E> {
                Ok(ByteCount(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<ByteCount, E> {
                u64::try_from(v).map(ByteCount).map_err(|_| {
                    E::custom(format!(
                        "negative value {v}: sizes, dimensions and offsets are counts >= 0"
                    ))
                })
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<ByteCount, E> {
                Err(E::custom(format!(
                    "{v} is not a whole number: sizes, dimensions and offsets are integers"
                )))
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

/// The product of a shape's dimensions, folded while parsing (no vector per tensor);
/// `None` when it overflows 64 bits.
#[derive(Clone, Copy, Debug)]
struct ShapeProduct(Option<u64>);

impl<'de> Deserialize<'de> for ShapeProduct {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct ShapeVisitor;
        impl<'de> Visitor<'de> for ShapeVisitor {
            type Value = ShapeProduct;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a shape: a list of non-negative integers")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<ShapeProduct, A::Error> {
                let mut product = Some(1u64);
                while let Some(ByteCount(dim)) = seq.next_element()? {
                    product = product.and_then(|p| p.checked_mul(dim));
                }
                Ok(ShapeProduct(product))
            }
        }
        deserializer.deserialize_seq(ShapeVisitor)
    }
}

/// FxHash-style multiply-rotate hasher for tensor ids: several times faster than SipHash on
/// short strings. Hash flooding is no concern for a tool reading its user's own files.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(K);
        }
    }
    /// The multiply-rotate rounds leave the low bits (the bucket index) poorly mixed, so
    /// finish with murmur3's avalanche step.
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

type IdMap<'a> = HashMap<&'a str, u32, BuildHasherDefault<IdHasher>>;

/// The `tensors` array, converted element by element while it is parsed.
struct TensorList<'a> {
    tensors: Vec<Tensor>,
    /// Whether each tensor's `kind` was written (else it is inferred once the graph inputs
    /// and outputs are known).
    kind_given: Vec<bool>,
    /// Every tensor's id as written (borrowed from the text unless it had escapes); the
    /// id map is built from these once the whole array is known.
    ids: Vec<Cow<'a, str>>,
    /// `(tensor, alias_of, alias_offset)`, resolved once every id is known.
    aliases: Vec<(u32, JsonId<'a>, u64)>,
    /// `(tensor, data_file)`, loaded after parsing.
    data_files: Vec<(u32, DataFileDoc<'a>)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for TensorList<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct ListVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ListVisitor<'a> {
            type Value = TensorList<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of tensor objects")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<TensorList<'a>, A::Error> {
                let capacity = seq.size_hint().unwrap_or(0);
                let mut list = TensorList {
                    tensors: Vec::with_capacity(capacity),
                    kind_given: Vec::with_capacity(capacity),
                    ids: Vec::with_capacity(capacity),
                    aliases: Vec::new(),
                    data_files: Vec::new(),
                };
                while let Some(doc) = seq.next_element::<TensorDoc<'a>>()? {
                    let id = list.push(doc).map_err(de::Error::custom)?;
                    list.ids.push(id);
                }
                Ok(list)
            }
        }
        deserializer.deserialize_seq(ListVisitor(std::marker::PhantomData))
    }
}

impl<'a> TensorList<'a> {
    /// Converts one parsed tensor object and returns its id; an error is a message the
    /// caller positions.
    fn push(&mut self, doc: TensorDoc<'a>) -> std::result::Result<Cow<'a, str>, String> {
        let index = u32::try_from(self.tensors.len())
            .ok()
            .filter(|&i| i < u32::MAX)
            .ok_or("more tensors than memplan can index (2^32 - 1)")?;
        let tensor = convert_tensor(&doc)
            .map_err(|what| format!("tensor '{}' (tensors[{index}]): {what}", doc.id.0))?;
        let at = |what: &str| format!("tensor '{}' (tensors[{index}]): {what}", tensor.id);
        let TensorDoc {
            id,
            kind,
            alias_of,
            alias_offset,
            data_file,
            ..
        } = doc;
        match (alias_of, alias_offset) {
            (Some(target), offset) => self
                .aliases
                .push((index, target, offset.map_or(0, |o| o.0))),
            (None, Some(_)) => {
                return Err(at(
                    "`alias_offset` without `alias_of`; name the tensor this one is a view of",
                ))
            }
            (None, None) => {}
        }
        if let Some(file) = data_file {
            if tensor.data.is_some() {
                return Err(at("both `data` and `data_file`; give the bytes once"));
            }
            self.data_files.push((index, file));
        }
        self.kind_given.push(kind.is_some());
        self.tensors.push(tensor);
        Ok(id.0)
    }
}

/// Tensor index by id, built at its exact size (one allocation, no rehashing of a million
/// entries); keys borrow the ids, so a bucket is a pointer, a length and an index. A repeated
/// id is an error.
fn index_ids<'i>(file: &dyn fmt::Display, ids: &'i [Cow<'_, str>]) -> Result<IdMap<'i>> {
    let mut index_of = IdMap::with_capacity_and_hasher(ids.len(), Default::default());
    for (index, id) in ids.iter().enumerate() {
        if let Some(first) = index_of.insert(id.as_ref(), index as u32) {
            return Err(Error::input(format!(
                "{file}: tensors[{index}]: duplicate tensor id '{id}' (first used by tensors[{first}]); ids must be unique"
            )));
        }
    }
    Ok(index_of)
}

/// Bytes per element of a dtype name.
fn dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "float32" => 4,
        "int64" | "uint64" | "float64" | "complex64" => 8,
        "complex128" => 16,
        _ => return None,
    })
}

const DTYPES: &str =
    "bool, int8, uint8, int16, uint16, float16, bfloat16, int32, uint32, float32, int64, uint64, float64, complex64, complex128";

/// The checks and conversions that need nothing but the tensor object itself. The kind is
/// provisional when not written (see [`TensorList::kind_given`]).
fn convert_tensor(doc: &TensorDoc<'_>) -> std::result::Result<Tensor, String> {
    let element_size = match doc.dtype.as_deref() {
        Some(dtype) => dtype_size(dtype)
            .ok_or_else(|| format!("unknown dtype `{dtype}`; use one of {DTYPES}"))?,
        None => 1,
    };
    let shape_size = match doc.shape {
        None => None,
        Some(_) if doc.dtype.is_none() => {
            return Err("`shape` needs a `dtype` to know the element size".into())
        }
        Some(ShapeProduct(elements)) => Some(
            elements
                .and_then(|e| e.checked_mul(element_size))
                .ok_or("the shape's byte size overflows 64 bits")?,
        ),
    };
    let size = match (doc.size.map(|s| s.0), shape_size) {
        (Some(size), Some(from_shape)) if size != from_shape => {
            return Err(format!(
                "`size` {size} disagrees with dtype and shape ({from_shape} bytes); give one or make them agree"
            ))
        }
        (Some(size), _) | (None, Some(size)) => size,
        (None, None) => return Err("no size: give `size` in bytes, or `dtype` and `shape`".into()),
    };
    if size > MAX_TENSOR_BYTES {
        return Err(format!(
            "size {size} bytes is larger than memplan accepts ({MAX_TENSOR_BYTES})"
        ));
    }
    if let Some(alignment) = doc.alignment.filter(|a| !a.is_power_of_two()) {
        return Err(format!("alignment {alignment} is not a power of two"));
    }
    let lifetime = match doc.lifetime {
        Some([first, last]) if first > last => {
            return Err(format!(
                "lifetime [{first}, {last}] ends before it starts; lifetimes are inclusive [first, last]"
            ))
        }
        Some([first, last]) => Some(Lifetime::new(first, last)),
        None => None,
    };
    let data = match &doc.data {
        Some(text) => Some(base64::decode(text).map_err(|(position, why)| {
            format!("`data` is not valid base64: {why} at character {position}")
        })?),
        None => None,
    };
    let id = doc.id.0.to_string();
    Ok(Tensor {
        name: doc
            .name
            .as_deref()
            .map_or_else(|| id.clone(), str::to_string),
        id,
        kind: doc.kind.unwrap_or(TensorKind::Intermediate),
        size,
        element_size,
        alignment: doc.alignment,
        alias_of: None,
        fixed_offset: doc.fixed_offset.map(|o| o.0),
        lifetime,
        data,
    })
}

/// Resolves references, loads data files, infers kinds and checks data against kinds.
fn build_model(path: &Path, doc: ModelDoc<'_>) -> Result<Model> {
    let file = path.display();
    if doc.version != 1 {
        return Err(Error::input(format!(
            "{file}: model format version {} is not supported; this memplan reads version 1",
            doc.version
        )));
    }
    let TensorList {
        mut tensors,
        kind_given,
        ids,
        aliases,
        data_files,
    } = doc.tensors;
    let index_of = index_ids(&file, &ids)?;
    let lookup = |id: &JsonId<'_>, place: &dyn Fn() -> String| -> Result<u32> {
        index_of.get(id.0.as_ref()).copied().ok_or_else(|| {
            Error::input(format!(
                "{file}: {}: no tensor has id '{}'; add it to `tensors` or fix the reference",
                place(),
                id.0
            ))
        })
    };
    let tensor_at = |tensors: &[Tensor], index: u32, what: String| {
        Error::input(format!(
            "{file}: tensor '{}' (tensors[{index}]): {what}",
            tensors[index as usize].id
        ))
    };

    for (index, target, offset) in &aliases {
        let target = lookup(target, &|| {
            format!(
                "tensor '{}' (tensors[{index}]): alias_of",
                tensors[*index as usize].id
            )
        })?;
        tensors[*index as usize].alias_of = Some(ModelAlias {
            target,
            offset: *offset,
        });
    }
    let mut loaded = DataFiles::new(path);
    for (index, data_file) in &data_files {
        let bytes = loaded
            .read(data_file, tensors[*index as usize].size)
            .map_err(|what| tensor_at(&tensors, *index, what))?;
        tensors[*index as usize].data = Some(bytes);
    }

    let inputs = doc
        .inputs
        .iter()
        .enumerate()
        .map(|(i, id)| lookup(id, &|| format!("inputs[{i}]")))
        .collect::<Result<Vec<u32>>>()?;
    let outputs = doc
        .outputs
        .iter()
        .enumerate()
        .map(|(i, id)| lookup(id, &|| format!("outputs[{i}]")))
        .collect::<Result<Vec<u32>>>()?;
    // Kind inference: graph input, else graph output, else constant when it has data, else
    // intermediate (the provisional kind).
    for &i in &outputs {
        if !kind_given[i as usize] {
            tensors[i as usize].kind = TensorKind::Output;
        }
    }
    for &i in &inputs {
        if !kind_given[i as usize] {
            tensors[i as usize].kind = TensorKind::Input;
        }
    }
    for (index, tensor) in tensors.iter_mut().enumerate() {
        if !kind_given[index] && tensor.data.is_some() && tensor.kind == TensorKind::Intermediate {
            tensor.kind = TensorKind::Constant;
        }
    }
    for (index, tensor) in tensors.iter().enumerate() {
        if let Some(what) = data_problem(tensor) {
            return Err(tensor_at(&tensors, index as u32, what));
        }
    }

    let OperatorList {
        types,
        ids: operator_ids,
        ranges,
    } = doc.operators;
    // Exporters list tensors in creation order and operators mostly name the tensor declared
    // right after the one named before (an operator's weights, then its output): try that
    // one first, a comparison with memory read just before, and fall back to the map.
    let mut next = 0usize;
    let resolved: Vec<Option<u32>> = operator_ids
        .iter()
        .map(|id| {
            let found = match ids.get(next) {
                Some(candidate) if candidate.as_ref() == id.0.as_ref() => Some(next as u32),
                _ => index_of.get(id.0.as_ref()).copied(),
            };
            if let Some(index) = found {
                next = index as usize + 1;
            }
            found
        })
        .collect();
    let mut operators = Vec::with_capacity(types.len());
    for (k, (op_type, [inputs, outputs])) in types.into_iter().zip(ranges).enumerate() {
        let indices = |range: std::ops::Range<usize>, list: &str| {
            let start = range.start;
            range
                .map(|at| {
                    resolved[at].ok_or_else(|| {
                        Error::input(format!(
                            "{file}: {}: {list}[{}]: no tensor has id '{}'; add it to `tensors` or fix the reference",
                            describe(k, &op_type),
                            at - start,
                            operator_ids[at].0
                        ))
                    })
                })
                .collect::<Result<Vec<u32>>>()
        };
        operators.push(Operator {
            inputs: indices(inputs, "inputs")?,
            outputs: indices(outputs, "outputs")?,
            op_type: op_type.into_owned(),
        });
    }

    Ok(Model {
        path: path.to_path_buf(),
        tensors,
        operators,
        inputs,
        outputs,
        num_steps: None,
        rule: LifetimeRule::Sequential,
    })
}

/// Only constants carry bytes, exactly `size` of them (an alias of a constant carries none).
fn data_problem(tensor: &Tensor) -> Option<String> {
    match (&tensor.data, tensor.kind) {
        (Some(bytes), TensorKind::Constant) if bytes.len() as u64 != tensor.size => Some(format!(
            "its data is {} bytes but the tensor is {} bytes; fix `size`/`shape` or the data",
            bytes.len(),
            tensor.size
        )),
        (Some(_), TensorKind::Constant) => None,
        (Some(_), other) => Some(format!(
            "{} tensors cannot carry data; only constants do (set \"kind\": \"constant\" or drop the data)",
            other.as_str()
        )),
        (None, TensorKind::Constant) if tensor.alias_of.is_none() => {
            Some("a constant needs its bytes: give `data` (base64) or `data_file`".into())
        }
        (None, _) => None,
    }
}

/// What every refusal of a `data_file` path tells the user to do.
const KEEP_DATA_FILES_INSIDE: &str = "put the data file in the model's directory or a \
     subdirectory of it and give its path relative to the model file";

/// Checks the form of a `data_file` path, before it touches the file system: relative,
/// without `..`, naming a file (not empty, not ending in a directory).
fn data_file_path(text: &str) -> std::result::Result<&Path, String> {
    let path = Path::new(text);
    let last_segment = text.rsplit(std::path::is_separator).next().unwrap_or(text);
    let problem = if text.is_empty() {
        "is empty"
    } else if path.has_root()
        || path.is_absolute()
        || matches!(path.components().next(), Some(Component::Prefix(_)))
    {
        "is absolute"
    } else if path.components().any(|c| c == Component::ParentDir) {
        "goes up a directory (`..`)"
    } else if last_segment.is_empty() || last_segment == "." {
        "names a directory, not a file"
    } else {
        return Ok(path);
    };
    Err(format!(
        "data_file path `{text}` {problem}; memplan reads data files only from inside the \
         model's directory: {KEEP_DATA_FILES_INSIDE}"
    ))
}

/// Binary files constant bytes come from, each read once.
///
/// Path policy: a model file may come from anyone, and the bytes read here end up in the
/// generated C sources, so a model must not be able to make memplan read (and embed in
/// firmware) any file the user can read, a private key say. A `data_file` path is therefore
/// relative, without `..` ([`data_file_path`]), resolved against the model file's directory,
/// and the file it names, once symbolic links are followed (canonicalized), must still lie
/// inside that directory (canonicalized too): a link leading out of it is refused.
///
/// Not covered: a hard link is the file itself under another name, so one placed in the
/// model's directory is read like any other file there. Making it takes write access to
/// that directory and the filesystem of the file it names, which a model file alone does
/// not give.
struct DataFiles {
    /// The model file's directory, as given (relative paths are joined to it).
    directory: PathBuf,
    /// `directory` canonicalized, resolved with the first data file.
    canonical_directory: Option<PathBuf>,
    /// By canonical path, so two spellings of one file share one copy.
    loaded: HashMap<PathBuf, Vec<u8>>,
    /// Bytes of the files loaded, and bytes copied out of them into tensors: see
    /// [`DataFiles::MAX_COPIES`].
    loaded_bytes: u64,
    copied_bytes: u64,
}

impl DataFiles {
    fn new(model_path: &Path) -> Self {
        let directory = match model_path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        DataFiles {
            directory,
            canonical_directory: None,
            loaded: HashMap::new(),
            loaded_bytes: 0,
            copied_bytes: 0,
        }
    }

    /// How many times, on average, each byte of the data files may be copied into tensors.
    /// Constants normally take disjoint ranges (each byte once); a few may share bytes, but
    /// every copy costs memory, and a model naming one range for thousands of tensors would
    /// hold thousands of copies of it.
    const MAX_COPIES: u64 = 4;

    /// The file `text` names under the path policy (see [`DataFiles`]): the path as the user
    /// will recognise it (for messages), and the canonical path to read.
    fn resolve(&mut self, text: &str) -> std::result::Result<(PathBuf, PathBuf), String> {
        let shown = self.directory.join(data_file_path(text)?);
        let cannot_read =
            |error: std::io::Error| format!("cannot read data_file {}: {error}", shown.display());
        let directory = match &self.canonical_directory {
            Some(directory) => directory,
            None => {
                let canonical = std::fs::canonicalize(&self.directory).map_err(cannot_read)?;
                self.canonical_directory.insert(canonical)
            }
        };
        let canonical = std::fs::canonicalize(&shown).map_err(cannot_read)?;
        if !canonical.starts_with(directory) {
            // The path is relative and has no `..`: only a symbolic link can lead out.
            return Err(format!(
                "data_file path `{text}` leads through a symbolic link to {}, outside the \
                 model's directory {}; memplan refuses links that leave it: \
                 {KEEP_DATA_FILES_INSIDE}",
                canonical.display(),
                directory.display()
            ));
        }
        Ok((shown, canonical))
    }

    /// The bytes `file` names (`length` defaults to the tensor's `size`).
    fn read(&mut self, file: &DataFileDoc<'_>, size: u64) -> std::result::Result<Vec<u8>, String> {
        let (path, canonical) = self.resolve(file.path.as_ref())?;
        if !self.loaded.contains_key(&canonical) {
            let cannot_read = |error: std::io::Error| {
                format!("cannot read data_file {}: {error}", path.display())
            };
            // Only regular files: a device such as /dev/zero never ends, a FIFO may block.
            if !std::fs::metadata(&canonical)
                .map_err(cannot_read)?
                .is_file()
            {
                return Err(format!(
                    "data_file {} is not a regular file; give a file holding the bytes",
                    path.display()
                ));
            }
            let bytes = std::fs::read(&canonical).map_err(cannot_read)?;
            self.loaded_bytes = self.loaded_bytes.saturating_add(bytes.len() as u64);
            self.loaded.insert(canonical.clone(), bytes);
        }
        let bytes = &self.loaded[&canonical];
        let offset = file.offset.map_or(0, |o| o.0);
        let length = file.length.map_or(size, |l| l.0);
        let range = offset
            .checked_add(length)
            .filter(|&end| end <= bytes.len() as u64)
            .map(|end| offset as usize..end as usize)
            .ok_or_else(|| {
                format!(
                    "data_file {}: bytes {offset}..{offset}+{length} lie outside the file ({} bytes)",
                    path.display(),
                    bytes.len()
                )
            })?;
        self.copied_bytes = self.copied_bytes.saturating_add(length);
        if self.copied_bytes > Self::MAX_COPIES.saturating_mul(self.loaded_bytes) {
            return Err(format!(
                "data_file {}: the tensors' data_file ranges add up to more than {} times the \
                 data files' size ({} bytes); each tensor should have bytes of its own, or be an \
                 alias (`alias_of`) of the tensor that has them",
                path.display(),
                Self::MAX_COPIES,
                self.loaded_bytes
            ));
        }
        Ok(bytes[range].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` to a fresh file `name` and reads it as a model.
    fn read(name: &str, text: &str) -> Result<Model> {
        let dir = std::env::temp_dir().join(format!("memplan-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        read_model_json(&path)
    }

    fn error(name: &str, text: &str) -> String {
        let error = read(name, text).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input, "{}", error.message);
        error.message
    }

    fn tensors(list: &str) -> String {
        format!(r#"{{"version":1,"tensors":[{list}]}}"#)
    }

    #[test]
    fn the_minimal_model_reads_with_inferred_kinds() {
        let model = read(
            "minimal.json",
            r#"{"version":1,"tensors":[{"id":"a","kind":"input","size":64},{"id":"b","kind":"output","size":64}],"operators":[{"type":"copy","inputs":["a"],"outputs":["b"]}],"inputs":["a"],"outputs":["b"]}"#,
        )
        .unwrap();
        assert_eq!(model.tensors.len(), 2);
        assert_eq!(model.operators[0].inputs, vec![0]);
        assert_eq!(
            (model.inputs.clone(), model.outputs.clone()),
            (vec![0], vec![1])
        );

        let model = read(
            "inferred.json",
            r#"{"version":1,"tensors":[{"id":0,"size":4},{"id":1,"size":4},{"id":2,"dtype":"int16","shape":[2],"data":"AQACAA=="},{"id":3,"size":8}],
               "operators":[{"type":"add","inputs":[0,2],"outputs":[3]},{"type":"neg","inputs":[3],"outputs":[1]}],"inputs":[0],"outputs":["1"]}"#,
        )
        .unwrap();
        let kinds: Vec<TensorKind> = model.tensors.iter().map(|t| t.kind).collect();
        use TensorKind::*;
        assert_eq!(kinds, vec![Input, Output, Constant, Intermediate]);
        assert_eq!(model.tensors[2].id, "2");
        assert_eq!(model.tensors[2].element_size, 2);
        assert_eq!(model.tensors[2].data.as_deref(), Some(&[1u8, 0, 2, 0][..]));
    }

    #[test]
    fn data_file_ranges_are_read_relative_to_the_model() {
        let dir = std::env::temp_dir().join(format!("memplan-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("w.bin"), [9u8, 8, 7, 6, 5, 4]).unwrap();
        let model = read(
            "datafile.json",
            &tensors(
                r#"{"id":"w","kind":"constant","size":3,"data_file":{"path":"w.bin","offset":2}}"#,
            ),
        )
        .unwrap();
        assert_eq!(model.tensors[0].data.as_deref(), Some(&[7u8, 6, 5][..]));
        let message = error(
            "datafile-bad.json",
            &tensors(
                r#"{"id":"w","kind":"constant","size":3,"data_file":{"path":"w.bin","offset":4}}"#,
            ),
        );
        assert!(
            message.contains("tensor 'w' (tensors[0]): data_file"),
            "{message}"
        );
        assert!(message.contains("outside the file (6 bytes)"), "{message}");
    }

    /// A fresh directory `label` for one test of the data_file policy.
    fn policy_dir(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "memplan-json-policy-{}-{label}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes `dir/model.json`, whose one constant (3 bytes) reads `data_path`.
    fn policy_model(dir: &Path, data_path: &str) -> PathBuf {
        let model = dir.join("model.json");
        let doc = serde_json::json!({
            "version": 1,
            "tensors": [{"id": "w", "kind": "constant", "size": 3, "data_file": {"path": data_path}}]
        });
        std::fs::write(&model, doc.to_string()).unwrap();
        model
    }

    /// A fresh directory with a model reading `data_path`: `(directory, model)`.
    fn policy_case(label: &str, data_path: &str) -> (PathBuf, PathBuf) {
        let dir = policy_dir(label);
        let model = policy_model(&dir, data_path);
        (dir, model)
    }

    /// Reads the model of [`policy_case`] and returns the input error's message.
    fn policy_refusal(model: &Path) -> String {
        let error = read_model_json(model).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input, "{}", error.message);
        let message = error.message;
        assert!(
            message.starts_with(&format!("{}: tensor 'w' (tensors[0]): ", model.display())),
            "{message}"
        );
        assert!(
            message.contains("put the data file in the model's directory or a subdirectory"),
            "{message}"
        );
        message
    }

    #[test]
    fn data_file_paths_in_a_subdirectory_are_read() {
        let (dir, model) = policy_case("subdir", "weights/w.bin");
        std::fs::create_dir_all(dir.join("weights")).unwrap();
        std::fs::write(dir.join("weights/w.bin"), [1u8, 2, 3]).unwrap();
        let model = read_model_json(&model).unwrap();
        assert_eq!(model.tensors[0].data.as_deref(), Some(&[1u8, 2, 3][..]));
    }

    #[test]
    fn absolute_data_file_paths_are_refused_even_inside_the_directory() {
        let dir = policy_dir("absolute");
        std::fs::write(dir.join("w.bin"), [1u8, 2, 3]).unwrap();
        let absolute = dir.join("w.bin").display().to_string();
        let model = policy_model(&dir, &absolute);
        let message = policy_refusal(&model);
        assert!(
            message.contains(&format!("data_file path `{absolute}` is absolute")),
            "{message}"
        );
    }

    #[test]
    fn data_file_paths_going_up_are_refused() {
        // A file that exists next to the model's directory.
        let dir = policy_dir("dotdot");
        let outside = dir.with_extension("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.bin"), [1u8, 2, 3]).unwrap();
        let up = format!(
            "../{}/secret.bin",
            outside.file_name().unwrap().to_str().unwrap()
        );
        let message = policy_refusal(&policy_model(&dir, &up));
        assert!(
            message.contains(&format!("data_file path `{up}` goes up a directory (`..`)")),
            "{message}"
        );
        // Even when it would come back inside.
        let (dir, model) = policy_case("dotdot-inside", "sub/../w.bin");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("w.bin"), [1u8, 2, 3]).unwrap();
        assert!(policy_refusal(&model).contains("goes up a directory"));
    }

    #[test]
    fn empty_and_directory_data_file_paths_are_refused() {
        for (label, path) in [
            ("empty", ""),
            ("slash", "weights/"),
            ("dot", "weights/."),
            ("cwd", "."),
        ] {
            let (dir, model) = policy_case(label, path);
            std::fs::create_dir_all(dir.join("weights")).unwrap();
            let message = policy_refusal(&model);
            let what = if path.is_empty() {
                "is empty"
            } else {
                "names a directory, not a file"
            };
            assert!(
                message.contains(&format!("data_file path `{path}` {what}")),
                "{path}: {message}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_out_of_the_model_directory_are_refused() {
        let (dir, model) = policy_case("symlink-out", "w.bin");
        let outside = dir.with_extension("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.bin"), [1u8, 2, 3]).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.bin"), dir.join("w.bin")).unwrap();
        let message = policy_refusal(&model);
        let canonical = std::fs::canonicalize(outside.join("secret.bin")).unwrap();
        assert!(
            message.contains(&format!(
                "data_file path `w.bin` leads through a symbolic link to {}, outside the model's directory",
                canonical.display()
            )),
            "{message}"
        );
        // A linked directory leading out is refused the same way.
        let (dir, model) = policy_case("symlink-dir-out", "linked/secret.bin");
        std::os::unix::fs::symlink(&outside, dir.join("linked")).unwrap();
        assert!(policy_refusal(&model).contains("outside the model's directory"));
        // A link that stays inside the directory is fine.
        let (dir, model) = policy_case("symlink-in", "w.bin");
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/data.bin"), [4u8, 5, 6]).unwrap();
        std::os::unix::fs::symlink("real/data.bin", dir.join("w.bin")).unwrap();
        let model = read_model_json(&model).unwrap();
        assert_eq!(model.tensors[0].data.as_deref(), Some(&[4u8, 5, 6][..]));
    }

    #[test]
    fn syntax_and_type_errors_carry_line_and_column() {
        let cases = [
            (
                "truncated.json",
                "{\"version\":1,\n\"tensors\":[{\"id\":\"a\",",
                "truncated.json:2:",
                "truncated",
            ),
            (
                "malformed.json",
                "{\"version\":1,\n\"tensors\":[}\n",
                "malformed.json:2:",
                "not valid JSON",
            ),
            (
                "types.json",
                "{\"version\":1,\n\"tensors\":[{\"id\":\"a\",\n \"size\":\"64\"}]}",
                "types.json:3:",
                "invalid type",
            ),
            (
                "negative.json",
                "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"size\":-4}]}",
                "negative.json:1:",
                "negative value -4",
            ),
            (
                "huge.json",
                "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"size\":1e30}]}",
                "huge.json:1:",
                "not a whole number",
            ),
            (
                "unknown-field.json",
                "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"sise\":4}]}",
                "unknown-field.json:1:",
                "unknown field `sise`",
            ),
            (
                "kind.json",
                "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"kind\":\"weight\",\"size\":4}]}",
                "kind.json:1:",
                "unknown variant `weight`",
            ),
            (
                "float-id.json",
                "{\"version\":1,\"tensors\":[{\"id\":1.5,\"size\":4}]}",
                "float-id.json:1:",
                "a tensor id",
            ),
        ];
        for (name, text, position, what) in cases {
            let message = error(name, text);
            assert!(message.contains(position), "{name}: {message}");
            assert!(message.contains(what), "{name}: {message}");
        }
        let message = error("empty.json", " \n");
        assert!(
            message.contains("empty.json: the file is empty"),
            "{message}"
        );
    }

    #[test]
    fn semantic_errors_name_the_tensor() {
        let cases = [
            (tensors(r#"{"id":"a","size":4},{"id":"a","size":4}"#), "tensors[1]: duplicate tensor id 'a' (first used by tensors[0])"),
            (tensors(r#"{"id":"a","size":4,"alias_of":"zz"}"#), "tensor 'a' (tensors[0]): alias_of: no tensor has id 'zz'"),
            (tensors(r#"{"id":"a","dtype":"int32","shape":[4294967296,4294967296]}"#), "tensor 'a' (tensors[0]): the shape's byte size overflows"),
            (tensors(r#"{"id":"a","size":1000000000000000000}"#), "larger than memplan accepts"),
            (tensors(r#"{"id":"a","kind":"constant","size":4,"data":"AAAA"}"#), "tensor 'a' (tensors[0]): its data is 3 bytes but the tensor is 4 bytes"),
            (tensors(r#"{"id":"a","kind":"constant","size":4,"data":"AA*A"}"#), "not valid base64"),
            (tensors(r#"{"id":"a","kind":"constant","size":4}"#), "a constant needs its bytes"),
            (tensors(r#"{"id":"a","kind":"intermediate","size":1,"data":"AA=="}"#), "intermediate tensors cannot carry data"),
            (tensors(r#"{"id":"a","shape":[2]}"#), "`shape` needs a `dtype`"),
            (tensors(r#"{"id":"a","dtype":"int8","shape":[2],"size":3}"#), "`size` 3 disagrees"),
            (tensors(r#"{"id":"a","dtype":"int3","size":3}"#), "unknown dtype `int3`"),
            (tensors(r#"{"id":"a"}"#), "no size"),
            (tensors(r#"{"id":"a","size":4,"alignment":6}"#), "alignment 6 is not a power of two"),
            (tensors(r#"{"id":"a","size":4,"lifetime":[3,1]}"#), "lifetime [3, 1] ends before it starts"),
            (r#"{"version":1,"tensors":[{"id":"a","size":4}],"operators":[{"type":"relu","inputs":["a"],"outputs":["b"]}]}"#.to_string(), "operators[0] (relu): outputs[0]: no tensor has id 'b'"),
            (r#"{"version":1,"tensors":[],"inputs":["x"]}"#.to_string(), "inputs[0]: no tensor has id 'x'"),
            (r#"{"version":2,"tensors":[]}"#.to_string(), "version 2 is not supported"),
        ];
        for (text, expected) in cases {
            let message = error("semantic.json", &text);
            assert!(
                message.starts_with(&format!("{}", std::env::temp_dir().display())),
                "{message}"
            );
            assert!(message.contains("semantic.json:"), "{message}");
            assert!(message.contains(expected), "{text}\n{message}");
        }
    }
}
