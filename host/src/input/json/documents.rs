//! The typed documents serde reads the model into (borrowing ids and base64 from the text),
//! with the seeds that turn each tensor and operator into the model as it is parsed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::convert_tensor;
use crate::error::{Error, Result};
use crate::input::model::{Tensor, TensorKind};
use crate::input::source::JsonId;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelDoc<'a> {
    pub(super) version: u32,
    #[serde(default, borrow)]
    #[allow(dead_code)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) tensors: TensorList<'a>,
    #[serde(default, borrow)]
    pub(super) operators: OperatorList<'a>,
    #[serde(default, borrow)]
    pub(super) inputs: Vec<JsonId<'a>>,
    #[serde(default, borrow)]
    pub(super) outputs: Vec<JsonId<'a>>,
}

/// `operators[3] (CONV_2D)` for messages.
pub(super) fn describe(index: usize, op_type: &str) -> String {
    format!("operators[{index}] ({op_type})")
}

/// The `operators` array with every operator's input and output ids in one flat list, so
/// that they are resolved afterwards in one tight loop: independent hash lookups the CPU
/// overlaps, instead of one cache miss at a time between parsing steps. No vector per
/// operator until the [`Operator`]s are built.
#[derive(Default)]
pub(super) struct OperatorList<'a> {
    pub(super) types: Vec<Cow<'a, str>>,
    /// Input and output ids of all operators, in file order.
    pub(super) ids: Vec<JsonId<'a>>,
    /// Per operator, where its inputs and its outputs are in `ids`.
    pub(super) ranges: Vec<[std::ops::Range<usize>; 2]>,
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
pub(super) struct OperatorSeed<'l, 'a> {
    pub(super) list: &'l mut OperatorList<'a>,
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
pub(super) struct IdsInto<'v, 'a> {
    pub(super) ids: &'v mut Vec<JsonId<'a>>,
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
pub(super) struct TensorDoc<'a> {
    #[serde(borrow)]
    pub(super) id: JsonId<'a>,
    #[serde(default, borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) kind: Option<TensorKind>,
    #[serde(default, borrow)]
    pub(super) dtype: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) shape: Option<ShapeProduct>,
    #[serde(default)]
    pub(super) size: Option<ByteCount>,
    #[serde(default)]
    pub(super) alignment: Option<u64>,
    #[serde(default, borrow)]
    pub(super) alias_of: Option<JsonId<'a>>,
    #[serde(default)]
    pub(super) alias_offset: Option<ByteCount>,
    #[serde(default)]
    pub(super) fixed_offset: Option<ByteCount>,
    #[serde(default)]
    pub(super) lifetime: Option<[u32; 2]>,
    #[serde(default, borrow)]
    pub(super) data: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) data_file: Option<DataFileDoc<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DataFileDoc<'a> {
    #[serde(borrow)]
    pub(super) path: Cow<'a, str>,
    #[serde(default)]
    pub(super) offset: Option<ByteCount>,
    #[serde(default)]
    pub(super) length: Option<ByteCount>,
}

/// A byte count or dimension: a non-negative integer. Its own type so that `-4` or `1.5`
/// get a message about sizes (with serde's line and column) rather than about `u64`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ByteCount(pub(super) u64);

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
                // serde_json reads integers beyond 64 bits as floats: printing the float would
                // show a rounded number the file does not contain.
                if v.fract() == 0.0 && v.abs() >= u64::MAX as f64 {
                    return Err(E::custom(
                        "a number beyond 2^64 - 1 (18446744073709551615): sizes, dimensions and \
                         offsets are 64-bit counts, and a tensor may have at most 2^48 bytes",
                    ));
                }
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
pub(super) struct ShapeProduct(pub(super) Option<u64>);

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
pub(super) struct IdHasher(pub(super) u64);

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

pub(super) type IdMap<'a> = HashMap<&'a str, u32, BuildHasherDefault<IdHasher>>;

/// The `tensors` array, converted element by element while it is parsed.
pub(super) struct TensorList<'a> {
    pub(super) tensors: Vec<Tensor>,
    /// Whether each tensor's `kind` was written (else it is inferred once the graph inputs
    /// and outputs are known).
    pub(super) kind_given: Vec<bool>,
    /// Every tensor's id as written (borrowed from the text unless it had escapes); the
    /// id map is built from these once the whole array is known.
    pub(super) ids: Vec<Cow<'a, str>>,
    /// `(tensor, alias_of, alias_offset)`, resolved once every id is known.
    pub(super) aliases: Vec<(u32, JsonId<'a>, u64)>,
    /// `(tensor, data_file)`, loaded after parsing.
    pub(super) data_files: Vec<(u32, DataFileDoc<'a>)>,
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
    pub(super) fn push(&mut self, doc: TensorDoc<'a>) -> std::result::Result<Cow<'a, str>, String> {
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
pub(super) fn index_ids<'i>(file: &dyn fmt::Display, ids: &'i [Cow<'_, str>]) -> Result<IdMap<'i>> {
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
