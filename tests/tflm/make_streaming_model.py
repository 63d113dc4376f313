"""Writes a small streaming model (resource variables) for memplan's TFLM runtime test:

    out_k = (in_k + in_k) + (in_k * in_k) + state;  state = out_k

State lives in a resource variable: subgraph 0 runs CALL_ONCE (subgraph 1: VAR_HANDLE, then
ASSIGN_VARIABLE of zeros), VAR_HANDLE, READ_VARIABLE, the arithmetic, ASSIGN_VARIABLE. This is
the shape of TFLM's streaming keyword models: VAR_HANDLE outputs take no arena space in TFLM,
and outputs depend on every earlier invocation, so a plan that overwrote state would show.

Usage: make_streaming_model.py OUT.tflite
"""

import sys

import flatbuffers
import numpy as np
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

SHAPE = [1, 64]
FLOAT32 = schema.TensorType.FLOAT32
RESOURCE = schema.TensorType.RESOURCE


def tensor(name, tensor_type, shape, buffer=0):
    t = schema.TensorT()
    t.name = name
    t.type = tensor_type
    t.shape = shape
    t.buffer = buffer
    return t


def operator(code, inputs, outputs, options_type=0, options=None):
    op = schema.OperatorT()
    op.opcodeIndex = code
    op.inputs = inputs
    op.outputs = outputs
    op.builtinOptionsType = options_type
    op.builtinOptions = options
    return op


def var_handle(code, output):
    options = schema.VarHandleOptionsT()
    options.container = ""
    options.sharedName = "state"
    return operator(code, [], [output], schema.BuiltinOptions.VarHandleOptions, options)


def main():
    codes = []
    for builtin in [
        schema.BuiltinOperator.CALL_ONCE,
        schema.BuiltinOperator.VAR_HANDLE,
        schema.BuiltinOperator.READ_VARIABLE,
        schema.BuiltinOperator.ASSIGN_VARIABLE,
        schema.BuiltinOperator.ADD,
        schema.BuiltinOperator.MUL,
    ]:
        code = schema.OperatorCodeT()
        code.builtinCode = builtin
        code.deprecatedBuiltinCode = min(builtin, 127)
        code.version = 1
        codes.append(code)
    CALL_ONCE, VAR_HANDLE, READ, ASSIGN, ADD, MUL = range(6)

    empty = schema.BufferT()
    zeros = schema.BufferT()
    zeros.data = np.zeros(SHAPE, dtype=np.float32).tobytes()

    main_graph = schema.SubGraphT()
    main_graph.name = "main"
    main_graph.tensors = [
        tensor("input", FLOAT32, SHAPE),
        tensor("state_handle", RESOURCE, []),
        tensor("state", FLOAT32, SHAPE),
        tensor("doubled", FLOAT32, SHAPE),
        tensor("squared", FLOAT32, SHAPE),
        tensor("sum", FLOAT32, SHAPE),
        tensor("output", FLOAT32, SHAPE),
    ]
    main_graph.inputs = [0]
    main_graph.outputs = [6]
    call_once = schema.CallOnceOptionsT()
    call_once.initSubgraphIndex = 1
    add = schema.AddOptionsT()
    main_graph.operators = [
        operator(CALL_ONCE, [], [], schema.BuiltinOptions.CallOnceOptions, call_once),
        var_handle(VAR_HANDLE, 1),
        operator(READ, [1], [2]),
        operator(ADD, [0, 0], [3], schema.BuiltinOptions.AddOptions, add),
        operator(MUL, [0, 0], [4], schema.BuiltinOptions.MulOptions, schema.MulOptionsT()),
        operator(ADD, [3, 4], [5], schema.BuiltinOptions.AddOptions, add),
        operator(ADD, [5, 2], [6], schema.BuiltinOptions.AddOptions, add),
        operator(ASSIGN, [1, 6], []),
    ]

    init_graph = schema.SubGraphT()
    init_graph.name = "init"
    init_graph.tensors = [
        tensor("init_handle", RESOURCE, []),
        tensor("zeros", FLOAT32, SHAPE, buffer=1),
    ]
    init_graph.inputs = []
    init_graph.outputs = []
    init_graph.operators = [var_handle(VAR_HANDLE, 0), operator(ASSIGN, [0, 1], [])]

    model = schema.ModelT()
    model.version = 3
    model.description = "memplan streaming test model"
    model.operatorCodes = codes
    model.subgraphs = [main_graph, init_graph]
    model.buffers = [empty, zeros]

    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    with open(sys.argv[1], "wb") as out:
        out.write(builder.Output())


if __name__ == "__main__":
    main()
