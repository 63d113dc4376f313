//! Writes `{prefix}.tflite`: the input model with memplan's offline plan in its
//! `OfflineMemoryAllocation` metadata (format: `facts/tflm-offline-plan.md`).
//!
//! How, without rewriting the model: a flatbuffer's references (uoffsets) only point forward,
//! from a table to what it owns, and the file starts with a uoffset to the root `Model` table.
//! So the new file is a new prefix followed by the whole input file, unchanged:
//!
//! - the prefix holds a new root `Model` table whose fields point at the input's own objects
//!   further on (operator codes, subgraphs, description, metadata_buffer, signature defs) and
//!   at new `buffers` and `metadata` vectors in the prefix;
//! - `buffers` lists every input buffer table (indices unchanged) and one new buffer holding
//!   the plan; `metadata` lists every input entry but one named `OfflineMemoryAllocation`
//!   (TFLM takes the last it reads, so an existing entry is replaced, never shadowed) and a new
//!   entry pointing at the new buffer;
//! - the prefix's length is a multiple of 16, so every byte of the input keeps its alignment
//!   (constant buffers are 16-byte aligned, `force_align: 16`); the input's old root table
//!   stays in the file, unreferenced;
//! - buffers stored outside the flatbuffer (`offset` > 1, an absolute file position) get new
//!   buffer tables with the offset moved by the prefix's length.
//!
//! The root table's field list is the schema's (version 3, fields 0 to 7); a model whose root
//! table has more fields, which memplan cannot know the meaning of, is refused. The result is
//! read back with memplan's own reader (flatbuffer verification included) and its offsets
//! compared with the plan before it is written.

use std::path::Path;

use crate::error::{Error, Result};
use crate::input::tflite::OFFLINE_PLAN_METADATA;

/// Version word of the entry (TFLite Micro ignores it; 1 is what its documentation shows).
const OFFLINE_PLAN_VERSION: i32 = 1;

// Field indices of the schema's tables.
pub(super) const MODEL_FIELDS: usize = 8;
pub(super) const MODEL_VERSION: usize = 0;
pub(super) const MODEL_BUFFERS: usize = 4;
const MODEL_METADATA: usize = 6;
pub(super) const BUFFER_OFFSET: usize = 1;
const BUFFER_SIZE: usize = 2;
const METADATA_NAME: usize = 0;

/// The input file, read as raw flatbuffer tables. The reader verified the flatbuffer, so
/// failures here are memplan's bugs; they are still errors, never panics.
pub(super) struct Input<'a> {
    pub(super) bytes: &'a [u8],
}

impl Input<'_> {
    pub(super) fn slice(&self, at: usize, len: usize) -> Result<&[u8]> {
        at.checked_add(len)
            .and_then(|end| self.bytes.get(at..end))
            .ok_or_else(|| {
                Error::internal(format!(
                    "the .tflite writer read past the model's end (byte {at})"
                ))
            })
    }
    pub(super) fn u16(&self, at: usize) -> Result<u16> {
        let bytes = self.slice(at, 2)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }
    pub(super) fn u32(&self, at: usize) -> Result<u32> {
        let bytes = self.slice(at, 4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
    pub(super) fn u64(&self, at: usize) -> Result<u64> {
        let bytes = self.slice(at, 8)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }
    /// Where the uoffset at `at` points.
    pub(super) fn follow(&self, at: usize) -> Result<usize> {
        Ok(at + self.u32(at)? as usize)
    }
    /// Positions of a table's fields (`None` when absent), from its vtable.
    pub(super) fn fields(&self, table: usize) -> Result<Vec<Option<usize>>> {
        let vtable = (table as i64 - i64::from(self.u32(table)? as i32)) as usize;
        let vtable_size = self.u16(vtable)? as usize;
        (0..vtable_size.saturating_sub(4) / 2)
            .map(|field| {
                let offset = self.u16(vtable + 4 + 2 * field)? as usize;
                Ok((offset != 0).then_some(table + offset))
            })
            .collect()
    }
    /// Positions of the tables a vector of tables at `vector` points at.
    pub(super) fn tables(&self, vector: usize) -> Result<Vec<usize>> {
        let len = self.u32(vector)? as usize;
        (0..len)
            .map(|element| self.follow(vector + 4 + 4 * element))
            .collect()
    }
}

/// Where a reference of the new prefix points.
#[derive(Clone, Copy)]
pub(super) enum Target {
    /// A position in the prefix.
    Prefix(usize),
    /// A position in the input file, which follows the prefix.
    Input(usize),
}

/// The new prefix, written front to back; references are patched once the prefix's length,
/// and so where the input starts, is known.
#[derive(Default)]
pub(super) struct Prefix {
    pub(super) bytes: Vec<u8>,
    pub(super) references: Vec<(usize, Target)>,
}

impl Prefix {
    pub(super) fn pad_to(&mut self, alignment: usize, remainder: usize) {
        while self.bytes.len() % alignment != remainder {
            self.bytes.push(0);
        }
    }
    pub(super) fn u16(&mut self, value: u16) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }
    pub(super) fn u32(&mut self, value: u32) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }
    pub(super) fn u64(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }
    /// A uoffset to be patched.
    pub(super) fn reference(&mut self, target: Target) {
        self.references.push((self.bytes.len(), target));
        self.u32(0);
    }
    /// A vtable, then the start of its table (4-aligned, or `table_remainder` mod 8), whose
    /// soffset points back at the vtable. `fields` are byte offsets in the table, 0 when
    /// absent. Returns the table's position.
    pub(super) fn table_start(
        &mut self,
        fields: &[u16],
        table_size: u16,
        table_remainder: usize,
    ) -> usize {
        self.pad_to(2, 0);
        let vtable = self.bytes.len();
        self.u16(4 + 2 * fields.len() as u16);
        self.u16(table_size);
        for &field in fields {
            self.u16(field);
        }
        self.pad_to(8, table_remainder);
        let table = self.bytes.len();
        self.u32((table - vtable) as u32);
        table
    }
    /// Points the root uoffset at `root_table` and every reference at its target, the input
    /// starting right after the prefix (whose length is final).
    pub(super) fn patch(&mut self, root_table: usize, path: &Path) -> Result<()> {
        let shift = self.bytes.len();
        self.bytes[0..4].copy_from_slice(&(root_table as u32).to_le_bytes());
        for &(at, target) in &self.references {
            let target = match target {
                Target::Prefix(position) => position,
                Target::Input(position) => shift + position,
            };
            let value = u32::try_from(target - at).map_err(|_| {
                Error::input(format!(
                    "{}: --emit-tflite: the model with its plan would be larger than 4 GiB, \
                     more than a flatbuffer can address",
                    path.display()
                ))
            })?;
            self.bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        }
        Ok(())
    }

    /// Points the reference written at `at` to the next byte.
    pub(super) fn here(&self) -> Target {
        Target::Prefix(self.bytes.len())
    }
}

/// The input model `file` with `offsets` (one per tensor of every subgraph) as its offline
/// plan; `path` names the input in messages.
pub fn model_with_offline_plan(
    file: &[u8],
    subgraph_count: u32,
    offsets: &[i32],
    path: &Path,
) -> Result<Vec<u8>> {
    let input = Input { bytes: file };
    let root = input.follow(0)?;
    let fields = input.fields(root)?;
    if fields.iter().skip(MODEL_FIELDS).any(Option::is_some) {
        return Err(Error::input(format!(
            "{}: --emit-tflite: the model's root table has fields beyond the TFLite schema \
             memplan knows (version 3, 8 fields); memplan cannot copy what it does not know, \
             so it writes no model. Re-export the model with a converter of the same schema.",
            path.display()
        )));
    }
    let field = |index: usize| fields.get(index).copied().flatten();

    // The input's buffer tables, and which keep bytes outside the flatbuffer.
    let buffers = match field(MODEL_BUFFERS) {
        Some(at) => input.tables(input.follow(at)?)?,
        None => Vec::new(),
    };
    let external = external_buffers(&input, &buffers)?;
    // Metadata entries kept: all but an existing offline plan.
    let metadata = metadata_kept(&input, field(MODEL_METADATA))?;

    let mut prefix = Prefix::default();
    prefix.u32(0); // root uoffset, patched below
    prefix.bytes.extend_from_slice(b"TFL3");

    // Root table: version, then one uoffset per present reference field, buffers and
    // metadata always.
    let mut layout = [0u16; MODEL_FIELDS];
    let mut size = 4u16;
    for (index, slot) in layout.iter_mut().enumerate() {
        if field(index).is_some() || index == MODEL_BUFFERS || index == MODEL_METADATA {
            *slot = size;
            size += 4;
        }
    }
    let root_table = prefix.table_start(&layout, size, 4);
    let mut buffers_reference = 0;
    let mut metadata_reference = 0;
    for (index, &slot) in layout.iter().enumerate() {
        if slot == 0 {
            continue;
        }
        match index {
            MODEL_VERSION => {
                let version = field(index).map(|at| input.u32(at)).transpose()?;
                prefix.u32(version.unwrap_or(3));
            }
            MODEL_BUFFERS => {
                buffers_reference = prefix.bytes.len();
                prefix.u32(0);
            }
            MODEL_METADATA => {
                metadata_reference = prefix.bytes.len();
                prefix.u32(0);
            }
            _ => {
                let target = input.follow(field(index).unwrap_or_default())?;
                prefix.reference(Target::Input(target));
            }
        }
    }

    // buffers: the input's, then the plan's.
    prefix.pad_to(4, 0);
    let here = prefix.here();
    prefix.references.push((buffers_reference, here));
    prefix.u32(buffers.len() as u32 + 1);
    let buffer_slots: Vec<usize> = (0..=buffers.len())
        .map(|_| {
            let slot = prefix.bytes.len();
            prefix.u32(0);
            slot
        })
        .collect();
    // Tables of buffers stored outside the flatbuffer: their offset moves with the input.
    let mut moved_offsets = Vec::new();
    for (index, &buffer) in buffers.iter().enumerate() {
        match external[index] {
            None => prefix
                .references
                .push((buffer_slots[index], Target::Input(buffer))),
            Some((offset, size)) => {
                // A new table: offset and size (u64, 8-aligned), moved by the prefix's
                // length once known.
                let table = prefix.table_start(&[0, 4, 12], 20, 4);
                prefix
                    .references
                    .push((buffer_slots[index], Target::Prefix(table)));
                moved_offsets.push(prefix.bytes.len());
                prefix.u64(offset); // moved below
                prefix.u64(size);
            }
        }
    }
    let plan_table = prefix.table_start(&[4], 8, 4);
    prefix
        .references
        .push((buffer_slots[buffers.len()], Target::Prefix(plan_table)));
    let plan_data_reference = prefix.bytes.len();
    prefix.u32(0);

    // metadata: the input's entries kept, then the plan's.
    prefix.pad_to(4, 0);
    let here = prefix.here();
    prefix.references.push((metadata_reference, here));
    prefix.u32(metadata.len() as u32 + 1);
    for &entry in &metadata {
        prefix.reference(Target::Input(entry));
    }
    let entry_slot = prefix.bytes.len();
    prefix.u32(0);
    let entry_table = prefix.table_start(&[4, 8], 12, 4);
    prefix
        .references
        .push((entry_slot, Target::Prefix(entry_table)));
    let name_reference = prefix.bytes.len();
    prefix.u32(0);
    prefix.u32(buffers.len() as u32);
    prefix.pad_to(4, 0);
    let here = prefix.here();
    prefix.references.push((name_reference, here));
    prefix.u32(OFFLINE_PLAN_METADATA.len() as u32);
    prefix.bytes.extend_from_slice(OFFLINE_PLAN_METADATA);
    prefix.bytes.push(0);

    write_plan_words(&mut prefix, plan_data_reference, subgraph_count, offsets);

    // Patch: the input starts right after the prefix.
    patch_references(&mut prefix, root_table, &moved_offsets, path)?;
    let mut model = prefix.bytes;
    model.extend_from_slice(file);
    check_written(&model, offsets, path)?;
    Ok(model)
}

/// Per buffer table of the input, its `(offset, size)` when it keeps its bytes outside the
/// flatbuffer (offset above 1), else `None`.
fn external_buffers(input: &Input, buffers: &[usize]) -> Result<Vec<Option<(u64, u64)>>> {
    let mut external = Vec::new();
    for &buffer in buffers {
        let fields = input.fields(buffer)?;
        let get = |index: usize| fields.get(index).copied().flatten();
        let offset = get(BUFFER_OFFSET).map(|at| input.u64(at)).transpose()?;
        let size = get(BUFFER_SIZE).map(|at| input.u64(at)).transpose()?;
        external.push(
            offset
                .filter(|&offset| offset > 1)
                .map(|offset| (offset, size.unwrap_or(0))),
        );
    }
    Ok(external)
}

/// The input's metadata entries to keep (vector at `at`, if any): all but an existing
/// offline plan.
fn metadata_kept(input: &Input, at: Option<usize>) -> Result<Vec<usize>> {
    let mut metadata = Vec::new();
    if let Some(at) = at {
        for entry in input.tables(input.follow(at)?)? {
            let fields = input.fields(entry)?;
            let name = match fields.get(METADATA_NAME).copied().flatten() {
                Some(at) => {
                    let string = input.follow(at)?;
                    let len = input.u32(string)? as usize;
                    Some(input.slice(string + 4, len)?)
                }
                None => None,
            };
            if name != Some(OFFLINE_PLAN_METADATA) {
                metadata.push(entry);
            }
        }
    }
    Ok(metadata)
}

/// The plan's words (version, subgraphs, count, offsets) as the plan buffer's data, 16-byte
/// aligned like every buffer's data, referenced from `plan_data_reference`.
fn write_plan_words(
    prefix: &mut Prefix,
    plan_data_reference: usize,
    subgraph_count: u32,
    offsets: &[i32],
) {
    prefix.pad_to(16, 12);
    let here = prefix.here();
    prefix.references.push((plan_data_reference, here));
    let words: Vec<i32> = [
        OFFLINE_PLAN_VERSION,
        subgraph_count as i32,
        offsets.len() as i32,
    ]
    .into_iter()
    .chain(offsets.iter().copied())
    .collect();
    prefix.u32((words.len() * 4) as u32);
    for word in words {
        prefix.u32(word as u32);
    }
    prefix.pad_to(16, 0);
}

/// Sets the root offset and every reference of the prefix, the input starting right after
/// it, and moves the offsets of external buffers by the prefix's length.
fn patch_references(
    prefix: &mut Prefix,
    root_table: usize,
    moved_offsets: &[usize],
    path: &Path,
) -> Result<()> {
    let shift = prefix.bytes.len();
    prefix.patch(root_table, path)?;
    for &at in moved_offsets {
        let mut word = [0u8; 8];
        word.copy_from_slice(&prefix.bytes[at..at + 8]);
        let moved = u64::from_le_bytes(word) + shift as u64;
        prefix.bytes[at..at + 8].copy_from_slice(&moved.to_le_bytes());
    }
    Ok(())
}

/// Reads the written model back (flatbuffer verification included) and compares its offline
/// plan with `offsets`: a model memplan writes is one its own reader accepts, plan and all.
fn check_written(model: &[u8], offsets: &[i32], path: &Path) -> Result<()> {
    let written = crate::input::tflite::read_tflite_bytes(model, path).map_err(|error| {
        Error::internal(format!(
            "the .tflite written with memplan's plan does not read back: {error}"
        ))
    })?;
    let found = match written.rule {
        crate::input::LifetimeRule::TfliteMicro(graph) => graph.offline_offsets,
        crate::input::LifetimeRule::Sequential => None,
    };
    if found.as_deref() != Some(offsets) {
        return Err(Error::internal(
            "the .tflite written with memplan's plan reads back with other offsets",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::tflite::read_tflite_bytes;
    use crate::input::LifetimeRule;

    fn corpus_model(name: &str) -> Option<Vec<u8>> {
        let models = memplan_planner_kit::testing::corpus_dir("models")?;
        Some(std::fs::read(models.join(name)).expect("corpus model"))
    }

    fn embedded_offsets(bytes: &[u8]) -> Option<Vec<i32>> {
        let model = read_tflite_bytes(bytes, Path::new("written.tflite")).expect("reads back");
        match model.rule {
            LifetimeRule::TfliteMicro(graph) => graph.offline_offsets,
            LifetimeRule::Sequential => panic!("a .tflite model has TFLM's rule"),
        }
    }

    #[test]
    fn the_plan_reads_back_and_replaces_an_existing_one() {
        let Some(file) = corpus_model("person_detect.tflite") else {
            assert!(std::env::var_os("CI").is_none(), "CI sets MEMPLAN_CORPUS");
            return;
        };
        let count = match read_tflite_bytes(&file, Path::new("p")).unwrap().rule {
            LifetimeRule::TfliteMicro(graph) => graph
                .subgraphs
                .iter()
                .map(|s| s.tensors.len())
                .sum::<usize>(),
            LifetimeRule::Sequential => unreachable!(),
        };
        let first: Vec<i32> = (0..count as i32).map(|i| i * 16).collect();
        let written = model_with_offline_plan(&file, 1, &first, Path::new("p")).unwrap();
        assert_eq!(written.len() % 16, file.len() % 16);
        assert_eq!(embedded_offsets(&written), Some(first));
        // Written again over its own output: still one entry, the new one.
        let second = vec![-1; count];
        let again = model_with_offline_plan(&written, 1, &second, Path::new("p")).unwrap();
        assert_eq!(embedded_offsets(&again), Some(second));
    }
}
