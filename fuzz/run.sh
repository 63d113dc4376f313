#!/usr/bin/env bash
# Runs one memplan fuzz target with a seed corpus built at run time.
#
#   fuzz/run.sh TARGET [SECONDS]        # TARGET: tflite | model_json | csv | plan_json
#
# Seeds come from fuzz/seeds/TARGET (a few small files kept in the repository), the
# regression inputs in host/tests/fuzz_regressions/TARGET, the shared reference data
# (MEMPLAN_CORPUS, default ../shared/data next to the repository: real .tflite models,
# MiniMalloc CSVs, TFLite Micro traces) and the repository's examples, copied into
# fuzz/corpus/TARGET, which is not committed. libFuzzer adds what it finds there;
# crashes land in fuzz/artifacts/TARGET.
#
# Needs cargo-fuzz; on a stable toolchain RUSTC_BOOTSTRAP=1 unlocks the nightly flags it
# passes (sanitizer coverage). One fuzzing process (no -jobs: with -jobs libFuzzer forks
# workers and writes fuzz-N.log into the current directory). Memory limits: libFuzzer
# stops at 2 GiB RSS or one 512 MiB allocation; the targets' own allocation bound
# (fuzz/src/lib.rs) is much tighter.
set -euo pipefail

target=${1:?usage: fuzz/run.sh TARGET [SECONDS]}
seconds=${2:-600}
fuzz_dir=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$fuzz_dir")
data=${MEMPLAN_CORPUS:-$repo/../shared/data}

corpus=$fuzz_dir/corpus/$target
mkdir -p "$corpus"
seed() {
    # Copy whatever of the given files exist (globs that match nothing are skipped).
    for file in "$@"; do
        if [ -f "$file" ]; then install -m 0644 "$file" "$corpus/"; fi
    done
}
seed "$fuzz_dir"/seeds/"$target"/* "$repo"/host/tests/fuzz_regressions/"$target"/*
case $target in
    tflite) seed "$data"/models/*.tflite ;;
    model_json) seed "$repo"/examples/*.json ;;
    csv) seed "$data"/minimalloc/*.csv "$data"/tflm-traces/*.csv ;;
    plan_json) ;;
    *) echo "unknown target $target" >&2; exit 2 ;;
esac

cd "$repo"
RUSTC_BOOTSTRAP=1 exec cargo fuzz run "$target" "$corpus" -- \
    -max_total_time="$seconds" \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1
