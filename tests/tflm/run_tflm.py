"""Runs a .tflite model on TensorFlow Lite Micro (the PyPI `tflite-micro` runtime, reference
kernels) and prints, as one JSON object on stdout: the arena head TFLM planned (bytes, as its
RecordingMicroAllocator reports it), a SHA-256 over every output of every invocation, and one
per output (over its values in every invocation).

Usage: run_tflm.py MODEL [--invocations N] [--seed S]

Inputs are random but seeded, so two models with the same graph get the same inputs. The
invocations run on one interpreter without reset, so stateful models (variable tensors,
resource variables) carry their state from one invocation to the next. memplan's end-to-end
tests run this on a model and on the model with memplan's offline plan, and compare.
"""

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile

import numpy as np
from tflite_micro.python.tflite_micro import runtime

ARENA_BYTES = 8 * 1024 * 1024


def captured_stderr(action):
    """What `action` prints on file descriptor 2 (TFLM's C++ code prints there, past Python)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            action()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        return capture.read().decode("utf-8", "replace")


def random_input(details, rng):
    dtype = np.dtype(details["dtype"])
    shape = tuple(int(d) for d in details["shape"])
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)


def count(details):
    """How many inputs (or outputs) the model has: the runtime has no call that says, so ask
    for details until it refuses (it prints why on stderr, which is kept out of the way)."""
    found = [0]

    def probe():
        while True:
            try:
                details(found[0])
            except Exception:
                return
            found[0] += 1

    captured_stderr(probe)
    return found[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--invocations", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    interpreter = runtime.Interpreter.from_file(args.model, arena_size=ARENA_BYTES)
    report = captured_stderr(interpreter.print_allocations)
    head = re.search(r"Arena allocation head (\d+) bytes", report)
    if head is None:
        sys.exit("TFLM did not report its arena head:\n" + report)

    rng = np.random.default_rng(args.seed)
    digest = hashlib.sha256()
    inputs = count(interpreter.get_input_details)
    outputs = count(interpreter.get_output_details)
    per_output = [hashlib.sha256() for _ in range(outputs)]
    for _ in range(args.invocations):
        for index in range(inputs):
            interpreter.set_input(random_input(interpreter.get_input_details(index), rng), index)
        interpreter.invoke()
        for index in range(outputs):
            values = np.ascontiguousarray(interpreter.get_output(index)).tobytes()
            digest.update(values)
            per_output[index].update(values)
    print(json.dumps({
        "head": int(head.group(1)),
        "inputs": inputs,
        "outputs": outputs,
        "invocations": args.invocations,
        "outputs_sha256": digest.hexdigest(),
        "output_sha256": [output.hexdigest() for output in per_output],
    }))


if __name__ == "__main__":
    main()
