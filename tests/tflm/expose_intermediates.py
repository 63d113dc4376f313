"""Writes a copy of a .tflite model whose subgraph 0 also outputs every tensor its operators
write (after the model's own outputs, in tensor order), so that running it shows every
intermediate tensor, not only the outputs. memplan's TFLM runtime test compares a model with
the one memplan wrote in another operator order this way: same tensors, same values.

The copy drops any offline plan (OfflineMemoryAllocation metadata): graph outputs live to the
end of the run, so a plan made for the model's own lifetimes would not hold. Resource handles
(VAR_HANDLE outputs) are not data and are left out.

Usage: expose_intermediates.py IN.tflite OUT.tflite
"""

import sys

import flatbuffers
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema


def main():
    with open(sys.argv[1], "rb") as source:
        buffer = bytearray(source.read())
    model = schema.ModelT.InitFromPackedBuf(buffer, 0)
    graph = model.subgraphs[0]
    written = set()
    for operator in graph.operators or []:
        for tensor in operator.outputs if operator.outputs is not None else []:
            if tensor >= 0 and graph.tensors[tensor].type != schema.TensorType.RESOURCE:
                written.add(int(tensor))
    outputs = [int(tensor) for tensor in graph.outputs]
    graph.outputs = outputs + sorted(written - set(outputs))
    model.metadata = [
        entry
        for entry in (model.metadata or [])
        if entry.name not in (b"OfflineMemoryAllocation", "OfflineMemoryAllocation")
    ]
    builder = flatbuffers.Builder(len(buffer) + 4096)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    with open(sys.argv[2], "wb") as out:
        out.write(builder.Output())


if __name__ == "__main__":
    main()
