"""Checks an installed memplan wheel (run by .ci/run with the venv's Python, from outside the
repository): the `memplan` command is on the venv's PATH with its planners, `memplan.plan`
returns the summary, the files and the rewritten model, and errors are `MemplanError`s with
memplan's message and exit code.

Usage: check_wheel.py MODELS_DIR REPO_EXAMPLE_JSON
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import memplan


def main() -> None:
    models, example = Path(sys.argv[1]), Path(sys.argv[2])
    venv_bin = Path(sys.executable).parent
    # The command, on the venv's PATH, with its built-in planners.
    found = shutil.which("memplan", path=str(venv_bin))
    assert found is not None, f"no memplan in {venv_bin}"
    assert Path(memplan.executable()) == Path(found), (memplan.executable(), found)
    listing = subprocess.run([found, "planners"], capture_output=True, text=True, check=True)
    for name in ["exact", "greedy-bestfit", "linear", "portfolio"]:
        assert f"{name} " in listing.stdout, listing.stdout
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    assert "plugin ABI 1.0.0" in version.stdout, version.stdout

    # A model file by path: the summary as a dict, every file written.
    result = memplan.plan(example, planner="linear")
    assert result.summary["planner"] == "linear", result.summary
    assert result.model is None
    assert "model_tensors.h" in result.files and "model_plan.json" in result.files
    # Model bytes, several planners, options per run.
    tflite = (models / "hello_world_int8.tflite").read_bytes()
    result = memplan.plan(tflite, planner=["greedy-bestfit", "exact"], emit_tflite=True)
    assert result.model is not None and result.model[4:8] == b"TFL3", result.model[:8]

    # Errors carry memplan's message and exit code.
    for model, planner, code, words in [
        (b"not a flatbuffer", None, 2, "tflite"),
        (tflite, "no-such-planner", 4, "no planner named `no-such-planner`"),
    ]:
        try:
            memplan.plan(model, planner=planner)
        except memplan.MemplanError as error:
            assert error.exit_code == code, (error.exit_code, error.message)
            assert words in error.message, error.message
            assert str(code) in str(error)
        else:
            raise AssertionError(f"memplan.plan({planner}) did not raise")
    try:
        memplan.plan(tflite, memory={"SRAM": 16})
    except memplan.MemplanError as error:
        assert error.exit_code == 5, (error.exit_code, error.message)
    else:
        raise AssertionError("a 16-byte budget did not raise")
    print("wheel checks passed", file=sys.stderr)


if __name__ == "__main__":
    os.environ.pop("MEMPLAN", None)
    main()
