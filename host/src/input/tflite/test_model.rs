//! A builder of small `.tflite` models for tests: the flatbuffer written field by field as
//! `schema.fbs` lays it out, so tests can make any model, well-formed or not.

use flatbuffers::{FlatBufferBuilder, TableFinishedWIPOffset, WIPOffset};

use super::schema::slot;

pub(super) const FLOAT32: i8 = 0;
pub(super) const INT32: i8 = 2;
pub(super) const STRING: i8 = 5;
pub(super) const INT8: i8 = 9;
pub(super) const ADD: i32 = 0;
pub(super) const CONV_2D: i32 = 3;
pub(super) const VAR_HANDLE: i32 = 142;
/// `BuiltinOptions` union members.
pub(super) const IF_OPTIONS: u8 = 92;
pub(super) const CALL_ONCE_OPTIONS: u8 = 103;

#[derive(Clone)]
pub(super) struct TestTensor {
    pub(super) shape: Option<Vec<i32>>,
    pub(super) type_code: i8,
    pub(super) buffer: u32,
    pub(super) name: Option<&'static str>,
    pub(super) is_variable: bool,
}

pub(super) fn tensor(name: &'static str, type_code: i8, shape: &[i32]) -> TestTensor {
    TestTensor {
        shape: Some(shape.to_vec()),
        type_code,
        buffer: 0,
        name: Some(name),
        is_variable: false,
    }
}

#[derive(Clone, Default)]
pub(super) struct TestOperator {
    pub(super) opcode: u32,
    pub(super) inputs: Vec<i32>,
    pub(super) outputs: Vec<i32>,
    /// Builtin options naming subgraphs: the `BuiltinOptions` union member and its
    /// subgraph-index fields in schema order.
    pub(super) subgraph_options: Option<(u8, Vec<i32>)>,
}

pub(super) fn op(opcode: u32, inputs: &[i32], outputs: &[i32]) -> TestOperator {
    TestOperator {
        opcode,
        inputs: inputs.to_vec(),
        outputs: outputs.to_vec(),
        subgraph_options: None,
    }
}

#[derive(Clone, Default)]
pub(super) struct TestSubgraph {
    pub(super) tensors: Vec<TestTensor>,
    pub(super) inputs: Vec<i32>,
    pub(super) outputs: Vec<i32>,
    pub(super) operators: Vec<TestOperator>,
}

#[derive(Clone)]
pub(super) enum TestBuffer {
    Inline(Vec<u8>),
    /// Bytes appended after the flatbuffer, located by `Buffer.offset`/`size`.
    External(Vec<u8>),
}

#[derive(Clone, Default)]
pub(super) struct TestModel {
    /// Builtin code of each operator code.
    pub(super) codes: Vec<i32>,
    pub(super) subgraphs: Vec<TestSubgraph>,
    /// Buffer 0 (the empty sentinel) is added in front of these.
    pub(super) buffers: Vec<TestBuffer>,
    pub(super) metadata: Vec<(&'static str, u32)>,
}

type Finished = WIPOffset<TableFinishedWIPOffset>;

impl TestModel {
    /// The `.tflite` bytes of this model.
    pub(super) fn bytes(&self) -> Vec<u8> {
        // External buffers sit after the flatbuffer, whose length is only known once it is
        // built: build once to learn it (offsets are fixed-width fields, so the length does
        // not depend on their values), then again with the real offsets.
        let draft = self.flatbuffer(0);
        let mut bytes = self.flatbuffer(draft.len() as u64);
        assert_eq!(bytes.len(), draft.len());
        for buffer in &self.buffers {
            if let TestBuffer::External(data) = buffer {
                bytes.extend_from_slice(data);
            }
        }
        bytes
    }

    pub(super) fn flatbuffer(&self, external_start: u64) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let codes: Vec<Finished> = self
            .codes
            .iter()
            .map(|&code| {
                let start = fbb.start_table();
                fbb.push_slot::<i8>(slot(0), code.min(127) as i8, 0);
                fbb.push_slot::<i32>(slot(3), code, 0);
                fbb.end_table(start)
            })
            .collect();
        let codes = fbb.create_vector(&codes);
        let subgraphs: Vec<Finished> = self
            .subgraphs
            .iter()
            .map(|subgraph| build_subgraph(&mut fbb, subgraph))
            .collect();
        let subgraphs = fbb.create_vector(&subgraphs);

        let mut buffers: Vec<Finished> = Vec::new();
        let start = fbb.start_table();
        buffers.push(fbb.end_table(start));
        let mut next_external = external_start;
        for buffer in &self.buffers {
            let table = match buffer {
                TestBuffer::Inline(data) => {
                    let data = fbb.create_vector(data);
                    let start = fbb.start_table();
                    fbb.push_slot_always(slot(0), data);
                    fbb.end_table(start)
                }
                TestBuffer::External(data) => {
                    let start = fbb.start_table();
                    fbb.push_slot_always::<u64>(slot(1), next_external);
                    fbb.push_slot_always::<u64>(slot(2), data.len() as u64);
                    next_external += data.len() as u64;
                    fbb.end_table(start)
                }
            };
            buffers.push(table);
        }
        let buffers = fbb.create_vector(&buffers);
        let metadata: Vec<Finished> = self
            .metadata
            .iter()
            .map(|&(name, buffer)| {
                let name = fbb.create_string(name);
                let start = fbb.start_table();
                fbb.push_slot_always(slot(0), name);
                fbb.push_slot::<u32>(slot(1), buffer, 0);
                fbb.end_table(start)
            })
            .collect();
        let metadata = fbb.create_vector(&metadata);

        let start = fbb.start_table();
        fbb.push_slot::<u32>(slot(0), 3, 0);
        fbb.push_slot_always(slot(1), codes);
        fbb.push_slot_always(slot(2), subgraphs);
        fbb.push_slot_always(slot(4), buffers);
        fbb.push_slot_always(slot(6), metadata);
        let root = fbb.end_table(start);
        fbb.finish(root, Some("TFL3"));
        fbb.finished_data().to_vec()
    }
}

pub(super) fn build_subgraph(fbb: &mut FlatBufferBuilder, subgraph: &TestSubgraph) -> Finished {
    let tensors: Vec<Finished> = subgraph
        .tensors
        .iter()
        .map(|tensor| {
            let shape = tensor.shape.as_ref().map(|shape| fbb.create_vector(shape));
            let name = tensor.name.map(|name| fbb.create_string(name));
            let start = fbb.start_table();
            if let Some(shape) = shape {
                fbb.push_slot_always(slot(0), shape);
            }
            fbb.push_slot::<i8>(slot(1), tensor.type_code, 0);
            fbb.push_slot::<u32>(slot(2), tensor.buffer, 0);
            if let Some(name) = name {
                fbb.push_slot_always(slot(3), name);
            }
            fbb.push_slot::<bool>(slot(5), tensor.is_variable, false);
            fbb.end_table(start)
        })
        .collect();
    let operators: Vec<Finished> = subgraph
        .operators
        .iter()
        .map(|operator| {
            let inputs = fbb.create_vector(&operator.inputs);
            let outputs = fbb.create_vector(&operator.outputs);
            let options = operator.subgraph_options.as_ref().map(|(member, indices)| {
                let start = fbb.start_table();
                for (id, &index) in indices.iter().enumerate() {
                    fbb.push_slot::<i32>(slot(id as u16), index, 0);
                }
                (*member, fbb.end_table(start))
            });
            let start = fbb.start_table();
            fbb.push_slot::<u32>(slot(0), operator.opcode, 0);
            fbb.push_slot_always(slot(1), inputs);
            fbb.push_slot_always(slot(2), outputs);
            if let Some((member, options)) = options {
                fbb.push_slot::<u8>(slot(3), member, 0);
                fbb.push_slot_always(slot(4), options);
            }
            fbb.end_table(start)
        })
        .collect();
    let tensors = fbb.create_vector(&tensors);
    let inputs = fbb.create_vector(&subgraph.inputs);
    let outputs = fbb.create_vector(&subgraph.outputs);
    let operators = fbb.create_vector(&operators);
    let start = fbb.start_table();
    fbb.push_slot_always(slot(0), tensors);
    fbb.push_slot_always(slot(1), inputs);
    fbb.push_slot_always(slot(2), outputs);
    fbb.push_slot_always(slot(3), operators);
    fbb.end_table(start)
}
