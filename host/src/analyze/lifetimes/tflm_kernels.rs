//! Scratch buffers TFLite Micro's reference kernels request in their Prepare code
//! (`RequestScratchBufferInArena`), as facts read from TFLM's kernels (see
//! `docs/tflite-micro.md`). TFLite Micro places them in the arena's head beside the tensors,
//! live during their operator only, and they can never get an offline offset; a plan that
//! ignores them is smaller on paper than what TFLM then needs (an SVDF model: 288 bytes of
//! tensors, 672 with the kernel's scratch).
//!
//! Sizes follow from the operator's tensors alone (types and shapes), in the order the kernel
//! requests them. Operators whose request depends on custom options memplan does not read
//! (TFLite_Detection_PostProcess, SignalRfft), and custom operators memplan does not know, are
//! reported as unknown: the caller cannot promise anything about TFLM's arena for them.
//! Optimized kernels (CMSIS-NN, Xtensa, ...) request other buffers; these are the reference
//! kernels', which the PyPI `tflite-micro` runtime runs.

use crate::input::graph::GraphTensor;

/// Bytes of a pointer on the 32-bit microcontrollers TFLite Micro runs on (ADD_N keeps one per
/// input).
const POINTER_BYTES: u64 = 4;

/// What a kernel asks TFLite Micro for in Prepare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelScratch {
    /// Bytes of each request, in request order (none for most kernels).
    Buffers(Vec<u64>),
    /// The kernel requests scratch buffers whose sizes memplan cannot derive; why.
    Unknown(&'static str),
}

// TFLite tensor type codes (schema.fbs `TensorType`).
const FLOAT32: i8 = 0;
const INT16: i8 = 7;
const INT8: i8 = 9;
const INT4: i8 = 17;

/// Elements of a tensor (1 for a scalar), `None` for a dynamic or overflowing shape.
fn elements(tensor: &GraphTensor) -> Option<u64> {
    tensor
        .shape
        .iter()
        .flatten()
        .try_fold(1u64, |count, &dimension| {
            count.checked_mul(u64::try_from(dimension).ok()?)
        })
}

/// Dimension `axis` of a tensor's shape.
fn dimension(tensor: &GraphTensor, axis: usize) -> Option<u64> {
    let value = *tensor.shape.as_ref()?.get(axis)?;
    u64::try_from(value).ok()
}

fn rank(tensor: &GraphTensor) -> u64 {
    tensor.shape.as_ref().map_or(0, |shape| shape.len() as u64)
}

/// The scratch buffers the reference kernel of operator `name` requests, given its input
/// tensors (`None` for an omitted optional input) and outputs.
pub fn kernel_scratch(
    name: &str,
    inputs: &[Option<&GraphTensor>],
    outputs: &[&GraphTensor],
) -> KernelScratch {
    const SHAPES: &str = "its tensors' shapes are not what the kernel expects";
    let input = |slot: usize| inputs.get(slot).copied().flatten();
    let output = |slot: usize| outputs.get(slot).copied();
    let sizes = match name {
        // svdf_common.cc: int8 input: batch x filters and batch x units int32 accumulators;
        // float input: batch x filters floats.
        "SVDF" => (|| {
            let (input, features, output) = (input(0)?, input(1)?, output(0)?);
            let batch = dimension(input, 0)?;
            let filters = dimension(features, 0)?;
            match input.type_code {
                INT8 => Some(vec![
                    batch.checked_mul(filters)?.checked_mul(4)?,
                    batch.checked_mul(dimension(output, 1)?)?.checked_mul(4)?,
                ]),
                FLOAT32 => Some(vec![batch.checked_mul(filters)?.checked_mul(4)?]),
                _ => Some(Vec::new()),
            }
        })(),
        // unidirectional_sequence_lstm.cc: four buffers of batch x state dimension cells,
        // which is the hidden state's (input 18) element count, in the cell state's (input
        // 19) type.
        "UNIDIRECTIONAL_SEQUENCE_LSTM" => (|| {
            let cells = elements(input(18)?)?;
            let cell_bytes = input(19)?.element_size?;
            Some(vec![cells.checked_mul(cell_bytes)?; 4])
        })(),
        // transpose_conv.cc: int16 with an int16 bias first converts the bias to int64; int8
        // accumulates the output in int32, int16 in int64.
        "TRANSPOSE_CONV" => (|| {
            let (data, output) = (input(2)?, output(0)?);
            let outputs = elements(output)?;
            match data.type_code {
                INT8 => Some(vec![outputs.checked_mul(4)?]),
                INT16 => {
                    let mut sizes = Vec::new();
                    if let Some(bias) = input(3) {
                        if bias.type_code == INT16 {
                            sizes.push(elements(bias)?.checked_mul(8)?);
                        }
                    }
                    sizes.push(outputs.checked_mul(8)?);
                    Some(sizes)
                }
                _ => Some(Vec::new()),
            }
        })(),
        // add_n.cc: float32 and int8 keep a pointer per input.
        "ADD_N" => (|| match output(0)?.type_code {
            FLOAT32 | INT8 => Some(vec![inputs.len() as u64 * POINTER_BYTES]),
            _ => Some(Vec::new()),
        })(),
        // mirror_pad.cc: two int arrays of the input's rank.
        "MIRROR_PAD" => (|| Some(vec![rank(input(0)?) * 4; 2]))(),
        // reduce_common.cc: MEAN and SUM on int8/int16 accumulate the output in int32; every
        // reduction keeps an index per input dimension and one per axis.
        "MEAN" | "SUM" => (|| {
            let (data, axis) = (input(0)?, input(1)?);
            let mut sizes = Vec::new();
            if matches!(data.type_code, INT8 | INT16) {
                sizes.push(elements(output(0)?)?.checked_mul(4)?);
            }
            sizes.push(rank(data) * 4);
            sizes.push(elements(axis)?.checked_mul(4)?);
            Some(sizes)
        })(),
        "REDUCE_MAX" | "REDUCE_MIN" | "REDUCE_ALL" => (|| {
            let (data, axis) = (input(0)?, input(1)?);
            Some(vec![rank(data) * 4, elements(axis)?.checked_mul(4)?])
        })(),
        // conv_common.cc, depthwise_conv_common.cc, fully_connected.cc: int4 filters are
        // unpacked into a byte per weight.
        "CONV_2D" | "DEPTHWISE_CONV_2D" | "FULLY_CONNECTED" => (|| {
            let filter = input(1)?;
            if filter.type_code == INT4 {
                Some(vec![elements(filter)?])
            } else {
                Some(Vec::new())
            }
        })(),
        "TFLite_Detection_PostProcess" => {
            return KernelScratch::Unknown(
                "its scratch buffers depend on max_detections and num_classes in its custom \
                 options",
            )
        }
        "SignalRfft" => {
            return KernelScratch::Unknown(
                "its scratch buffer depends on fft_length in its custom options",
            )
        }
        name if is_builtin_or_known_custom(name) => Some(Vec::new()),
        _ => {
            return KernelScratch::Unknown(
                "it is a custom operator memplan does not know, whose kernel may request \
                 scratch buffers",
            )
        }
    };
    match sizes {
        Some(sizes) => KernelScratch::Buffers(sizes),
        None => KernelScratch::Unknown(SHAPES),
    }
}

/// Builtin operators (upper-case names from the schema) and TFLite Micro's own custom
/// operators whose reference kernels request no scratch buffer.
fn is_builtin_or_known_custom(name: &str) -> bool {
    const KNOWN_CUSTOM: &[&str] = &[
        "SignalDelay",
        "SignalEnergy",
        "SignalFftAutoScale",
        "SignalFilterBank",
        "SignalFilterBankLog",
        "SignalFilterBankSquareRoot",
        "SignalFilterBankSpectralSubtraction",
        "SignalFramer",
        "SignalIrfft",
        "SignalOverlapAdd",
        "SignalPCAN",
        "SignalStacker",
        "SignalWindow",
    ];
    let builtin = !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'_');
    builtin || KNOWN_CUSTOM.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::graph::GraphStorage;

    fn tensor(type_code: i8, element_size: u64, shape: &[i32]) -> GraphTensor {
        GraphTensor {
            name: "t".into(),
            type_name: "",
            type_code,
            element_size: Some(element_size),
            shape: Some(shape.to_vec()),
            storage: GraphStorage::Arena,
        }
    }

    #[test]
    fn svdf_int8_requests_filter_and_unit_accumulators() {
        let input = tensor(INT8, 1, &[1, 40]);
        let features = tensor(INT8, 1, &[64, 40]);
        let output = tensor(INT8, 1, &[1, 32]);
        let scratch = kernel_scratch("SVDF", &[Some(&input), Some(&features)], &[&output]);
        assert_eq!(scratch, KernelScratch::Buffers(vec![64 * 4, 32 * 4]));
        let float = tensor(FLOAT32, 4, &[2, 40]);
        let scratch = kernel_scratch("SVDF", &[Some(&float), Some(&features)], &[&output]);
        assert_eq!(scratch, KernelScratch::Buffers(vec![2 * 64 * 4]));
    }

    #[test]
    fn lstm_requests_four_state_buffers_in_the_cell_type() {
        let other = tensor(INT8, 1, &[1]);
        let hidden = tensor(INT8, 1, &[2, 20]);
        let cell = tensor(INT16, 2, &[2, 20]);
        let mut inputs = vec![Some(&other); 18];
        inputs.push(Some(&hidden));
        inputs.push(Some(&cell));
        let scratch = kernel_scratch("UNIDIRECTIONAL_SEQUENCE_LSTM", &inputs, &[&other]);
        assert_eq!(scratch, KernelScratch::Buffers(vec![80; 4]));
    }

    #[test]
    fn reductions_and_int4_filters() {
        let data = tensor(INT8, 1, &[1, 4, 4, 8]);
        let axis = tensor(2, 4, &[2]);
        let output = tensor(INT8, 1, &[1, 8]);
        assert_eq!(
            kernel_scratch("MEAN", &[Some(&data), Some(&axis)], &[&output]),
            KernelScratch::Buffers(vec![32, 16, 8])
        );
        assert_eq!(
            kernel_scratch("REDUCE_MAX", &[Some(&data), Some(&axis)], &[&output]),
            KernelScratch::Buffers(vec![16, 8])
        );
        let int4 = tensor(INT4, 1, &[8, 3, 3, 8]);
        assert_eq!(
            kernel_scratch("CONV_2D", &[Some(&data), Some(&int4)], &[&output]),
            KernelScratch::Buffers(vec![8 * 3 * 3 * 8])
        );
        let int8 = tensor(INT8, 1, &[8, 3, 3, 8]);
        assert_eq!(
            kernel_scratch("CONV_2D", &[Some(&data), Some(&int8)], &[&output]),
            KernelScratch::Buffers(Vec::new())
        );
    }

    #[test]
    fn operators_without_scratch_and_unknown_ones() {
        let data = tensor(INT8, 1, &[4]);
        assert_eq!(
            kernel_scratch("ADD", &[Some(&data), Some(&data)], &[&data]),
            KernelScratch::Buffers(Vec::new())
        );
        assert_eq!(
            kernel_scratch("SignalWindow", &[Some(&data)], &[&data]),
            KernelScratch::Buffers(Vec::new())
        );
        assert!(matches!(
            kernel_scratch("TFLite_Detection_PostProcess", &[], &[]),
            KernelScratch::Unknown(_)
        ));
        assert!(matches!(
            kernel_scratch("MyVendorOp", &[], &[]),
            KernelScratch::Unknown(_)
        ));
        // A missing input is a model TFLM would refuse; memplan says it cannot tell.
        assert!(matches!(
            kernel_scratch("SVDF", &[Some(&data)], &[&data]),
            KernelScratch::Unknown(_)
        ));
    }
}
