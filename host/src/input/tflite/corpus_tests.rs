//! The reader against the real models of the shared corpus (`MEMPLAN_CORPUS`, see
//! `data/models/README.md`): planning their scratch tensors and kernel scratch buffers the way
//! TFLite Micro's greedy planner does (`placement::tflm_greedy`) must give exactly the arena
//! head TFLite Micro itself measured (`tflm_head`).

use std::path::PathBuf;

use super::read_tflite;
use crate::analyze::lifetimes::tflite_micro::resolve;
use crate::input::model::{Lifetime, Model, TensorKind};
use crate::placement::tflm_greedy::{tflm_head, TflmBuffer};
use memplan_planner_kit::testing::{corpus_dir, TFLM_HEAD};
use memplan_plugin_api::ArenaRole;

/// The corpus models directory, or `None` (test skipped) when `MEMPLAN_CORPUS` is unset.
fn models_dir() -> Option<PathBuf> {
    let dir = corpus_dir("models");
    if dir.is_none() {
        eprintln!("MEMPLAN_CORPUS is not set: skipping the .tflite corpus test");
    }
    dir
}

/// The buffers TFLite Micro plans for a model: its scratch tensors with a size (kernel
/// scratch buffers included), as TFLite Micro places them itself.
fn tflm_buffers(model: &Model) -> Vec<TflmBuffer> {
    model
        .tensors
        .iter()
        .filter(|tensor| {
            matches!(
                tensor.kind,
                TensorKind::Input | TensorKind::Output | TensorKind::Intermediate
            ) && tensor.alias_of.is_none()
                && tensor.size > 0
        })
        .map(|tensor| TflmBuffer {
            size: tensor.size,
            lifetime: tensor
                .lifetime
                .expect("the reader gives every tensor a lifetime"),
            offline_offset: None,
        })
        .collect()
}

#[test]
fn corpus_models_match_tflite_micro_heads() {
    let Some(dir) = models_dir() else { return };
    let mut mismatches = Vec::new();
    for (file, measured) in TFLM_HEAD {
        let model = read_tflite(&dir.join(file))
            .and_then(resolve)
            .unwrap_or_else(|err| panic!("{file}: {err}"));
        let head = tflm_head(&tflm_buffers(&model)).expect("small enough to simulate");
        if head != measured {
            mismatches.push(format!("{file}: simulated {head}, TFLite Micro {measured}"));
        }
        for tensor in &model.tensors {
            assert!(
                tensor.lifetime.is_some(),
                "{file}: tensor {} has no lifetime",
                tensor.id
            );
            if tensor.kind.role() == ArenaRole::Scratch {
                assert_eq!(
                    tensor.size % 16,
                    0,
                    "{file}: tensor {} not rounded",
                    tensor.id
                );
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn person_detect_has_the_documented_shape() {
    let Some(dir) = models_dir() else { return };
    let model = read_tflite(&dir.join("person_detect.tflite"))
        .and_then(resolve)
        .unwrap();
    let constants: Vec<_> = model
        .tensors
        .iter()
        .filter(|tensor| tensor.kind == TensorKind::Constant)
        .collect();
    assert_eq!(model.tensors.len(), 89);
    assert_eq!(constants.len(), 57);
    let constant_bytes: u64 = constants.iter().map(|tensor| tensor.size).sum();
    assert_eq!(constant_bytes, 218_928);
    assert!(constants
        .iter()
        .all(|tensor| tensor.data.as_ref().map(Vec::len) == Some(tensor.size as usize)));
    assert_eq!(model.operators.len(), 31);
    assert_eq!(model.num_steps, Some(32));
    let input = &model.tensors[model.inputs[0] as usize];
    let output = &model.tensors[model.outputs[0] as usize];
    assert_eq!((model.inputs.len(), input.id.as_str()), (1, "88"));
    assert_eq!((model.outputs.len(), output.id.as_str()), (1, "87"));
    assert_eq!(input.kind, TensorKind::Input);
    assert_eq!(output.kind, TensorKind::Output);
    assert_eq!(input.lifetime, Some(Lifetime::new(0, 1)));
    assert_eq!(output.lifetime, Some(Lifetime::new(31, 31)));
    // Ids are the TFLite indices, names the model's.
    assert!(model
        .tensors
        .iter()
        .all(|tensor| tensor.id.parse::<u32>().is_ok()));
    assert_eq!(input.name, "input");
}

/// A real model damaged at every byte reads without panicking: a model or an input error.
#[test]
fn damaged_real_model_never_panics() {
    let Some(dir) = models_dir() else { return };
    let path = dir.join("hello_world_int8.tflite");
    let bytes = std::fs::read(&path).unwrap();
    for position in 0..bytes.len() {
        for value in [0x00, 0x7f, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[position] = value;
            if let Err(err) = super::read_tflite_bytes(&damaged, &path).and_then(resolve) {
                assert_eq!(err.kind, crate::error::ErrorKind::Input, "{}", err.message);
            }
        }
    }
}
