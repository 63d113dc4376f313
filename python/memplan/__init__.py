"""memplan from Python: plan where every tensor of a model lives in memory.

`plan` runs the `memplan` command that this package installs (the same binary, with its
planners built in) and returns what it reported and wrote; errors raise `MemplanError` with
memplan's message and exit code. The command line is the contract (`memplan plan --help`,
the repository's README.md); this module only passes arguments and collects results.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

__all__ = [
    "MemplanError",
    "PlanResult",
    "executable",
    "plan",
    "tflite_micro_arena_head",
]

#: What `plan` accepts as a model: its bytes, or a path to a `.tflite`, `.json` or `.csv` file.
Model = Union[bytes, str, "os.PathLike[str]"]

# Exit codes of the memplan command (README.md): what each means, for messages.
EXIT_CODES = {
    1: "internal error",
    2: "bad usage or input",
    3: "plan rejected by the checker",
    4: "planner failure",
    5: "does not fit the memory budgets",
}


class MemplanError(Exception):
    """memplan failed: `message` is its error message, `exit_code` its exit code (2 bad
    input, 3 plan rejected, 4 planner failure, 5 does not fit; negative: ended by that
    signal) and `stderr` everything it printed there."""

    def __init__(self, message: str, exit_code: int, stderr: str) -> None:
        super().__init__(f"{message} (memplan exit code {exit_code})")
        self.message = message
        self.exit_code = exit_code
        self.stderr = stderr


@dataclass(frozen=True)
class PlanResult:
    """What `plan` returns."""

    #: The summary `memplan plan --format json` prints: arenas, hashes, planner, timings and,
    #: for a `.tflite` model, TensorFlow Lite Micro's arena heads (`summary["tflite_micro"]`).
    summary: Dict[str, Any]
    #: With `emit_tflite=True`, the `.tflite` model carrying memplan's offline plan.
    model: Optional[bytes]
    #: Every file memplan wrote (C sources, plan, residency report, ...), by file name.
    files: Dict[str, bytes] = field(default_factory=dict)


def executable() -> str:
    """The `memplan` binary this package runs: `MEMPLAN` if set, else the one installed with
    this package (the scripts directory of its environment), else the first on PATH."""
    override = os.environ.get("MEMPLAN")
    if override:
        return override
    name = "memplan.exe" if os.name == "nt" else "memplan"
    schemes = [sysconfig.get_default_scheme()]
    user_scheme = f"{os.name}_user"
    if user_scheme in sysconfig.get_scheme_names():
        schemes.append(user_scheme)
    for scheme in schemes:
        candidate = Path(sysconfig.get_path("scripts", scheme)) / name
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise MemplanError(
            "cannot find the memplan command: reinstall the memplan wheel, or set MEMPLAN to "
            "the binary",
            127,
            "",
        )
    return found


def plan(
    model: Model,
    *,
    planner: Union[str, Sequence[str], None] = None,
    planner_options: Union[str, Mapping[str, Any], None] = None,
    emit_tflite: bool = False,
    target: Union[str, "os.PathLike[str]", None] = None,
    memory: Optional[Mapping[str, int]] = None,
    prefix: str = "model",
    timeout: Optional[float] = None,
    model_format: str = "tflite",
    extra_args: Sequence[str] = (),
) -> PlanResult:
    """Plans `model` (its bytes, or a path) with `memplan plan` and returns the summary, the
    rewritten model (with `emit_tflite`) and every file written.

    `planner`: a name or several (the smallest checked plan is kept; default `portfolio`).
    `planner_options`: JSON text or a mapping, given to every selected planner. `target`: a
    target name or file; `memory`: budgets by memory name (`{"SRAM": 65536}`). `model_format`
    is the file extension bytes are written with (`tflite`, `json` or `csv`); a path keeps its
    own. `extra_args` go to `memplan plan` as they are. Raises `MemplanError` when memplan
    exits with anything but 0.
    """
    with tempfile.TemporaryDirectory(prefix="memplan-") as scratch:
        if isinstance(model, (bytes, bytearray, memoryview)):
            input_path = Path(scratch) / f"model.{model_format}"
            input_path.write_bytes(bytes(model))
        else:
            input_path = Path(os.fspath(model)).resolve()
        out = Path(scratch) / "out"
        command = [executable(), "plan", str(input_path), "--out", str(out), "--format", "json"]
        command += ["--prefix", prefix]
        if planner is not None:
            names = [planner] if isinstance(planner, str) else list(planner)
            command += ["--planner", ",".join(names)]
        if planner_options is not None:
            text = planner_options if isinstance(planner_options, str) else json.dumps(
                dict(planner_options)
            )
            command += ["--planner-options", text]
        if emit_tflite:
            command.append("--emit-tflite")
        if target is not None:
            command += ["--target", os.fspath(target)]
        for name, size in (memory or {}).items():
            command += ["--memory", f"{name}={int(size)}"]
        if timeout is not None:
            command += ["--timeout", str(timeout)]
        command += list(extra_args)

        completed = subprocess.run(command, capture_output=True, cwd=scratch)
        stderr = completed.stderr.decode("utf-8", "replace")
        if completed.returncode != 0:
            raise MemplanError(_error_message(stderr, completed.returncode), completed.returncode, stderr)
        if stderr:
            # Warnings (a shadowed plugin, a plan not written to the model and why): shown
            # as the command shows them.
            sys.stderr.write(stderr)
        summary = json.loads(completed.stdout)
        files = {path.name: path.read_bytes() for path in sorted(out.iterdir()) if path.is_file()}
        model_bytes = None
        if emit_tflite:
            written = (summary.get("tflite_micro") or {}).get("model_written")
            name = Path(written).name if written else f"{input_path.stem}.tflite"
            model_bytes = files.get(name)
        return PlanResult(summary=summary, model=model_bytes, files=files)


def _error_message(stderr: str, exit_code: int) -> str:
    """memplan's error message out of its stderr (`memplan: error: ...` and what follows)."""
    marker = "memplan: error: "
    start = stderr.rfind(marker)
    if start >= 0:
        return stderr[start + len(marker):].strip()
    if exit_code < 0:
        return f"memplan was ended by signal {-exit_code}"
    meaning = EXIT_CODES.get(exit_code, "failed")
    return stderr.strip() or f"memplan failed ({meaning})"


def tflite_micro_arena_head(interpreter: Any) -> int:
    """The arena head (bytes) a TensorFlow Lite Micro interpreter (the PyPI `tflite-micro`
    runtime, `runtime.Interpreter`) planned: what memplan predicts in
    `summary["tflite_micro"]["head_written"]`. The runtime reports it only on the C++ side's
    stderr (`print_allocations`), so that is read here."""
    report = _captured_stderr(interpreter.print_allocations)
    head = re.search(r"Arena allocation head (\d+) bytes", report)
    if head is None:
        raise ValueError("the TFLite Micro runtime did not report its arena head:\n" + report)
    return int(head.group(1))


def _captured_stderr(action: Callable[[], Any]) -> str:
    """What `action` prints on file descriptor 2 (C++ code prints there, past Python)."""
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
