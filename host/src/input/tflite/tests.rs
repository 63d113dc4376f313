//! Unit tests on small models written here with the flatbuffers builder, field by field as
//! `schema.fbs` lays them out.

use std::path::Path;

use super::read_tflite_bytes;
use super::schema::builtin;
use super::test_model::*;
use crate::analyze::lifetimes::tflite_micro::resolve;
use crate::error::{ErrorKind, Result};
use crate::input::model::{Lifetime, Model, TensorKind};

/// Adds a CALL_ONCE operator code and an operator of it that runs subgraph `init`, at
/// `position` in subgraph 0.
fn add_call_once(model: &mut TestModel, position: usize, init: Option<i32>) {
    model.codes.push(builtin::CALL_ONCE);
    let mut call = op(model.codes.len() as u32 - 1, &[], &[]);
    call.subgraph_options = init.map(|init| (CALL_ONCE_OPTIONS, vec![init]));
    model.subgraphs[0].operators.insert(position, call);
}

/// input(0) -CONV_2D(weights 3)-> 1 -ADD(1, 1)-> output(2); tensor 4 is never used.
fn chain() -> TestModel {
    let mut weights = tensor("weights", INT8, &[2, 3]);
    weights.buffer = 1;
    TestModel {
        codes: vec![CONV_2D, ADD],
        subgraphs: vec![TestSubgraph {
            tensors: vec![
                tensor("input", FLOAT32, &[1, 5]),
                tensor("hidden", FLOAT32, &[1, 2, 3]),
                tensor("output", INT8, &[]),
                weights,
                tensor("unused", FLOAT32, &[100]),
            ],
            inputs: vec![0],
            outputs: vec![2],
            operators: vec![op(0, &[0, 3, -1], &[1]), op(1, &[1, 1], &[2])],
        }],
        buffers: vec![TestBuffer::Inline(vec![1, 2, 3, 4, 5, 6])],
        metadata: vec![],
    }
}

/// Reads `bytes` and applies TFLite Micro's lifetime rule, as `memplan plan` does.
fn read_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
    read_tflite_bytes(bytes, path).and_then(resolve)
}

fn read(model: &TestModel) -> Result<Model> {
    read_bytes(&model.bytes(), Path::new("test.tflite"))
}

/// The input error message for `bytes`; fails the test if reading succeeds or is not an
/// input error.
fn input_error(bytes: &[u8]) -> String {
    let err = read_bytes(bytes, Path::new("bad.tflite")).expect_err("reading must fail");
    assert_eq!(err.kind, ErrorKind::Input, "{}", err.message);
    assert!(err.message.starts_with("bad.tflite: "), "{}", err.message);
    err.message
}

fn by_id<'m>(model: &'m Model, id: &str) -> &'m crate::input::model::Tensor {
    model
        .tensors
        .iter()
        .find(|tensor| tensor.id == id)
        .unwrap_or_else(|| panic!("no tensor {id}"))
}

#[test]
fn chain_gets_tflite_micro_lifetimes_sizes_and_kinds() {
    let model = read(&chain()).unwrap();
    let ids: Vec<&str> = model
        .tensors
        .iter()
        .map(|tensor| tensor.id.as_str())
        .collect();
    // The never-used tensor 4 is left out; ids stay the TFLite indices.
    assert_eq!(ids, ["0", "1", "2", "3"]);
    let summary: Vec<_> = model
        .tensors
        .iter()
        .map(|tensor| {
            (
                tensor.name.as_str(),
                tensor.kind,
                tensor.size,
                tensor.lifetime,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("input", TensorKind::Input, 32, Some(Lifetime::new(0, 1))),
            (
                "hidden",
                TensorKind::Intermediate,
                32,
                Some(Lifetime::new(1, 2))
            ),
            ("output", TensorKind::Output, 16, Some(Lifetime::new(2, 2))),
            (
                "weights",
                TensorKind::Constant,
                6,
                Some(Lifetime::new(0, 2))
            ),
        ]
    );
    assert_eq!(model.num_steps, Some(3));
    assert_eq!(
        (model.inputs.clone(), model.outputs.clone()),
        (vec![0], vec![2])
    );
    let operators: Vec<_> = model
        .operators
        .iter()
        .map(|operator| {
            (
                operator.op_type.as_str(),
                operator.inputs.clone(),
                operator.outputs.clone(),
            )
        })
        .collect();
    // The omitted optional input (-1) is not listed.
    assert_eq!(
        operators,
        [
            ("CONV_2D", vec![0, 3], vec![1]),
            ("ADD", vec![1, 1], vec![2])
        ]
    );
    assert_eq!(by_id(&model, "0").element_size, 4);
    assert_eq!(by_id(&model, "2").element_size, 1);
    assert!(model
        .tensors
        .iter()
        .all(|tensor| tensor.alignment == Some(16)));
    assert_eq!(model.path, Path::new("test.tflite"));
}

#[test]
fn constant_keeps_its_bytes_inline_or_after_the_flatbuffer() {
    let inline = read(&chain()).unwrap();
    assert_eq!(
        by_id(&inline, "3").data.as_deref(),
        Some(&[1u8, 2, 3, 4, 5, 6][..])
    );

    // The offset/size form of large models: the bytes follow the flatbuffer in the file.
    let mut external = chain();
    external.buffers = vec![TestBuffer::External(vec![9, 8, 7, 6, 5, 4])];
    let model = read(&external).unwrap();
    let weights = by_id(&model, "3");
    assert_eq!(weights.kind, TensorKind::Constant);
    assert_eq!(weights.data.as_deref(), Some(&[9u8, 8, 7, 6, 5, 4][..]));
    assert_eq!(weights.size, 6);

    // Cut the appended bytes off: the buffer now points past the end of the file.
    let mut bytes = external.bytes();
    bytes.truncate(bytes.len() - 3);
    let message = input_error(&bytes);
    assert!(
        message.contains("buffer 1") && message.contains("truncated"),
        "{message}"
    );
}

#[test]
fn tensors_sharing_a_buffer_store_its_bytes_once() {
    let mut model = chain();
    let mut copy = tensor("weights_again", INT8, &[6]);
    copy.buffer = 1;
    model.subgraphs[0].tensors.push(copy);
    model.subgraphs[0].operators[1].inputs.push(5);
    let model = read(&model).unwrap();
    let again = by_id(&model, "5");
    assert_eq!(again.kind, TensorKind::Constant);
    assert_eq!(again.size, 6);
    assert_eq!(again.data, None);
    let owner = model
        .tensors
        .iter()
        .position(|tensor| tensor.id == "3")
        .unwrap() as u32;
    assert_eq!(
        again.alias_of,
        Some(crate::input::model::ModelAlias {
            target: owner,
            offset: 0
        })
    );
}

#[test]
fn empty_buffer_means_planned_not_constant() {
    let mut model = chain();
    model.buffers = vec![TestBuffer::Inline(Vec::new())];
    let model = read(&model).unwrap();
    // Tensor 3 has an empty buffer: TFLite Micro plans it like any other tensor; as it is
    // only read, it lives from the start to its last use.
    let weights = by_id(&model, "3");
    assert_eq!(weights.kind, TensorKind::Intermediate);
    assert_eq!(
        (weights.size, weights.lifetime),
        (16, Some(Lifetime::new(0, 1)))
    );
}

#[test]
fn variable_tensor_is_persistent_for_the_whole_run() {
    let mut model = chain();
    let mut state = tensor("state", INT32, &[3]);
    state.is_variable = true;
    model.subgraphs[0].tensors.push(state);
    model.subgraphs[0].operators[1].inputs.push(5);
    let model = read(&model).unwrap();
    let state = by_id(&model, "5");
    assert_eq!(state.kind, TensorKind::Persistent);
    assert_eq!(
        (state.size, state.lifetime),
        (16, Some(Lifetime::new(0, 2)))
    );
    assert_eq!(state.data, None);
}

#[test]
fn call_once_walks_its_init_subgraph() {
    let mut model = chain();
    add_call_once(&mut model, 0, Some(1));
    model.codes.push(VAR_HANDLE);
    model.subgraphs.push(TestSubgraph {
        tensors: vec![
            tensor("handle", INT32, &[]),
            tensor("init_value", FLOAT32, &[4]),
        ],
        inputs: vec![],
        outputs: vec![],
        operators: vec![op(3, &[], &[0]), op(1, &[0], &[1])],
    });
    let model = read(&model).unwrap();
    // Step 1: CALL_ONCE; step 2: entering the init subgraph; its operators at 3 and 4; the
    // main graph's CONV_2D at 5 and ADD at 6. VAR_HANDLE's output points at persistent op
    // data in TFLite Micro, never at the arena.
    assert_eq!(by_id(&model, "1:0").lifetime, Some(Lifetime::new(0, 6)));
    assert_eq!(by_id(&model, "1:0").kind, TensorKind::Persistent);
    assert_eq!(by_id(&model, "1:1").lifetime, Some(Lifetime::new(4, 4)));
    assert_eq!(by_id(&model, "1:1").kind, TensorKind::Intermediate);
    assert_eq!(by_id(&model, "1:1").name, "init_value");
    assert_eq!(by_id(&model, "0").lifetime, Some(Lifetime::new(0, 5)));
    assert_eq!(by_id(&model, "2").lifetime, Some(Lifetime::new(6, 6)));
    assert_eq!(by_id(&model, "3").lifetime, Some(Lifetime::new(0, 6)));
    assert_eq!(model.num_steps, Some(7));
    let order: Vec<&str> = model
        .operators
        .iter()
        .map(|operator| operator.op_type.as_str())
        .collect();
    assert_eq!(order, ["CALL_ONCE", "VAR_HANDLE", "ADD", "CONV_2D", "ADD"]);
}

#[test]
fn if_walks_both_branches_in_order() {
    let branch = |name: &'static str| TestSubgraph {
        tensors: vec![tensor(name, FLOAT32, &[4])],
        inputs: vec![],
        outputs: vec![0],
        operators: vec![],
    };
    let mut model = chain();
    model.codes.push(builtin::IF);
    let mut branch_op = op(2, &[0], &[]);
    branch_op.subgraph_options = Some((IF_OPTIONS, vec![2, 1]));
    model.subgraphs[0].operators.insert(1, branch_op);
    model.subgraphs.push(branch("else_out"));
    model.subgraphs.push(branch("then_out"));
    let model = read(&model).unwrap();
    // CONV_2D at 1, IF at 2: then (subgraph 2) at 3, else (subgraph 1) at 4; ADD at 5.
    assert_eq!(by_id(&model, "2:0").lifetime, Some(Lifetime::new(3, 3)));
    assert_eq!(by_id(&model, "1:0").lifetime, Some(Lifetime::new(4, 4)));
    assert_eq!(by_id(&model, "0").lifetime, Some(Lifetime::new(0, 4)));
    assert_eq!(model.num_steps, Some(6));
}

#[test]
fn subgraph_no_operator_runs_is_left_out() {
    let mut model = chain();
    model.subgraphs.push(TestSubgraph {
        tensors: vec![tensor("elsewhere", FLOAT32, &[4])],
        inputs: vec![0],
        outputs: vec![0],
        operators: vec![],
    });
    let model = read(&model).unwrap();
    assert!(model.tensors.iter().all(|tensor| !tensor.id.contains(':')));
}

#[test]
fn offline_planned_offsets_become_fixed_offsets() {
    let mut model = chain();
    // Version 1, subgraph 0, 5 tensors: tensor 1 at offset 64, the rest planned online.
    let words: [i32; 8] = [1, 0, 5, -1, 64, -1, -1, -1];
    let bytes = words.iter().flat_map(|word| word.to_le_bytes()).collect();
    model.buffers.push(TestBuffer::Inline(bytes));
    model.metadata.push(("OfflineMemoryAllocation", 2));
    let read_model = read(&model).unwrap();
    assert_eq!(by_id(&read_model, "1").fixed_offset, Some(64));
    assert_eq!(by_id(&read_model, "0").fixed_offset, None);

    // A tensor count that disagrees with the model is refused.
    let words: [i32; 5] = [1, 0, 2, -1, 64];
    model.buffers[1] =
        TestBuffer::Inline(words.iter().flat_map(|word| word.to_le_bytes()).collect());
    let message = input_error(&model.bytes());
    assert!(message.contains("OfflineMemoryAllocation"), "{message}");

    // Only -1 means "place it online": TFLite Micro would use -2 as an offset.
    for negative in [-2, i32::MIN] {
        let words: [i32; 8] = [1, 0, 5, -1, negative, -1, -1, -1];
        model.buffers[1] =
            TestBuffer::Inline(words.iter().flat_map(|word| word.to_le_bytes()).collect());
        let message = input_error(&model.bytes());
        assert!(
            message.contains(&format!("tensor 1 (hidden) offset {negative}")),
            "{message}"
        );
    }
}

#[test]
fn bad_magic_and_short_files_are_not_tflite() {
    let mut bytes = chain().bytes();
    bytes[4..8].copy_from_slice(b"XXXX");
    let message = input_error(&bytes);
    assert!(
        message.contains("not a TFLite model") && message.contains("TFL3"),
        "{message}"
    );
    let message = input_error(b"TFL");
    assert!(message.contains("not a TFLite model"), "{message}");
    input_error(b"");
}

#[test]
fn truncated_file_fails_verification() {
    let bytes = chain().bytes();
    let message = input_error(&bytes[..bytes.len() / 2]);
    assert!(message.contains("failed verification"), "{message}");
}

#[test]
fn out_of_range_indices_are_named() {
    let mut model = chain();
    model.subgraphs[0].operators[1].inputs[1] = 99;
    let message = input_error(&model.bytes());
    assert!(
        message.contains("operator 1 (ADD) input 1 is tensor 99")
            && message.contains("has 5 tensors"),
        "{message}"
    );

    let mut model = chain();
    model.subgraphs[0].outputs = vec![-2];
    let message = input_error(&model.bytes());
    assert!(message.contains("graph output 0 is tensor -2"), "{message}");

    let mut model = chain();
    model.subgraphs[0].operators[0].opcode = 7;
    let message = input_error(&model.bytes());
    assert!(
        message.contains("operator code 7 is out of range"),
        "{message}"
    );

    let mut model = chain();
    model.subgraphs[0].tensors[3].buffer = 40;
    let message = input_error(&model.bytes());
    assert!(message.contains("buffer 40 is out of range"), "{message}");

    let mut model = chain();
    add_call_once(&mut model, 2, Some(5));
    let message = input_error(&model.bytes());
    assert!(message.contains("runs subgraph 5"), "{message}");
}

#[test]
fn unsupported_features_are_named() {
    let mut model = chain();
    model.subgraphs[0].tensors[1].shape = Some(vec![-1, 3]);
    let message = input_error(&model.bytes());
    assert!(
        message.contains("unsupported") && message.contains("dynamic shape"),
        "{message}"
    );

    let mut model = chain();
    model.subgraphs[0].tensors[1].type_code = STRING;
    let message = input_error(&model.bytes());
    assert!(
        message.contains("unsupported") && message.contains("STRING"),
        "{message}"
    );

    let mut model = chain();
    add_call_once(&mut model, 2, Some(0));
    let message = input_error(&model.bytes());
    assert!(
        message.contains("unsupported") && message.contains("runs itself"),
        "{message}"
    );

    // CALL_ONCE without its options cannot say which subgraph to run.
    let mut model = chain();
    add_call_once(&mut model, 2, None);
    let message = input_error(&model.bytes());
    assert!(message.contains("has no CALL_ONCE options"), "{message}");

    let mut model = chain();
    model.subgraphs.clear();
    let message = input_error(&model.bytes());
    assert!(message.contains("no subgraph"), "{message}");
}

#[test]
fn scalar_is_one_element_and_empty_stays_empty() {
    let mut model = chain();
    model.subgraphs[0].tensors[2].shape = None;
    model.subgraphs[0].tensors[2].name = None;
    model.subgraphs[0].tensors[1].shape = Some(vec![4, 0]);
    let model = read(&model).unwrap();
    let output = by_id(&model, "2");
    assert_eq!((output.size, output.name.as_str()), (16, "2"));
    // An empty tensor stays empty (and keeps its lifetime).
    let empty = by_id(&model, "1");
    assert_eq!((empty.size, empty.lifetime), (0, Some(Lifetime::new(1, 2))));
}

/// Every prefix and every single-byte corruption of a valid model reads without panicking:
/// either a model or an input error.
#[test]
fn damaged_files_never_panic() {
    let mut model = chain();
    add_call_once(&mut model, 0, Some(1));
    model.subgraphs.push(TestSubgraph {
        tensors: vec![tensor("t", FLOAT32, &[4])],
        inputs: vec![],
        outputs: vec![0],
        operators: vec![],
    });
    model.buffers.push(TestBuffer::External(vec![1, 2, 3, 4]));
    let bytes = model.bytes();
    let check = |bytes: &[u8]| match read_bytes(bytes, Path::new("x.tflite")) {
        Ok(_) => {}
        Err(err) => assert_eq!(err.kind, ErrorKind::Input, "{}", err.message),
    };
    for length in 0..bytes.len() {
        check(&bytes[..length]);
    }
    for position in 0..bytes.len() {
        for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[position] = value;
            check(&damaged);
        }
    }
}

#[test]
fn tensors_beyond_the_size_cap_are_input_errors() {
    // 2^31-1 x 2^31-1 int8 is ~4.6e18 bytes: past the 2^48-byte cap every reader applies.
    let mut model = chain();
    model.subgraphs[0].tensors[1] = tensor("huge", INT8, &[i32::MAX, i32::MAX]);
    let message = input_error(&model.bytes());
    assert!(
        message.contains("tensor 1 (huge)") && message.contains("larger than memplan accepts"),
        "{message}"
    );
}
