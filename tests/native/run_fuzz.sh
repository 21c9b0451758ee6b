#!/usr/bin/env bash
# Fuzz the native JPEG kernel, then the keyed permutation and the batch plan's crop (each a
# fifth of the inputs, a quarter of the time), under AddressSanitizer + UndefinedBehaviorSanitizer with libFuzzer (clang 14 and
# its runtime: Debian's clang-14 and libclang-rt-14-dev).
#   tests/native/run_fuzz.sh [RUNS [SECONDS]]   (default 100000 inputs, at most 600 s)
# It stops after RUNS inputs or SECONDS, whichever comes first (CI: a short bounded run).
# Any sanitizer report or crash stops the run with a non-zero exit and leaves the input
# in the work directory; the last lines report how many inputs ran.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runs="${1:-100000}"
seconds="${2:-600}"
work="${FUZZ_WORK:-/tmp/flowloader-fuzz}"
mkdir -p "$work/corpus"
python "$here/make_corpus.py" "$work/seeds"
clang-14 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -ffp-contract=off \
    "$here/fuzz_kernel.c" "$here/../../src/flowloader/vision/_native/jpeg_kernel.c" \
    -ljpeg -o "$work/fuzz_kernel"
cd "$work"
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    ./fuzz_kernel -runs="$runs" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 corpus seeds 2>&1 | tee fuzz.log |
    grep -E "^Done|ERROR|SUMMARY|stat::number_of_executed_units"

# fuzz_part NAME HARNESS SOURCE MAX_LEN: a fifth of the inputs, a quarter of the time
fuzz_part() {
    clang-14 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        "$here/$2" "$here/../../src/flowloader/$3" -o "$work/$1"
    mkdir -p "$work/${1}_corpus"
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
        "./$1" -runs="$((runs / 5))" -max_total_time="$((seconds / 4 + 1))" -max_len="$4" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${1}_corpus" 2>&1 |
        tee "$1.log" | grep -E "^Done|ERROR|SUMMARY|stat::number_of_executed_units"
}

echo "== the keyed permutation (_native/permute.c)"
fuzz_part fuzz_permute fuzz_permute.c _native/permute.c 4800
echo "== the batch plan's crop (vision/_native/stack_crop.c)"
fuzz_part fuzz_crop fuzz_crop.c vision/_native/stack_crop.c 256
