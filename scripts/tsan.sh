#!/usr/bin/env bash
# ThreadSanitizer tier: builds the forward, live-runner and app-core tests with clang-14 and -fsanitize=thread into
# build-tsan/ and runs them. OpenMP under TSan: clang's libomp with the archer tool (libarcher, from libomp-14-dev)
# tells TSan about OpenMP's barriers and tasks, so the project's own threads (the parallel attention and its
# on_rows calls, the app's job worker) get real race detection without false reports from the runtime.
# OpenBLAS (the OpenMP build, linked against GCC's libgomp) is not instrumented: ignore_noninstrumented_modules.
set -euo pipefail
cd "$(dirname "$0")/.."
llvm=/usr/lib/llvm-14/lib
[ -f "$llvm/libarcher.so" ] || { echo "tsan: $llvm/libarcher.so missing (apt-get install libomp-14-dev)" >&2; exit 2; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
      -DFOCAL_TSAN=ON -DFOCAL_CUDA=OFF -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST "${launcher[@]}" >/dev/null
cmake --build build-tsan -j"$(nproc)" --target forward_test live_runner_test app_core_test
export OMP_TOOL_LIBRARIES="$llvm/libarcher.so"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"  # several threads even on a small machine, so races can show
export TSAN_OPTIONS="halt_on_error=1 abort_on_error=0 exitcode=66 second_deadlock_stack=1 ignore_noninstrumented_modules=1 ${TSAN_OPTIONS:-}"
export ARCHER_OPTIONS="${ARCHER_OPTIONS:-verbose=0}"
export FOCAL_TEST_DATA="$PWD/build-tsan/tests"
# Canary: the same toolchain must report a planted race (exit 66) and pass correctly synchronised code.
clang++-14 -fsanitize=thread -fopenmp=libomp -g -O1 tests/tsan/canary.cpp -o build-tsan/tsan_canary
if build-tsan/tsan_canary race >/dev/null 2>&1; then
  echo "tsan: the canary's planted race was not reported: this tier would miss races" >&2
  exit 1
fi
build-tsan/tsan_canary clean >/dev/null || { echo "tsan: false report on the canary's synchronised code" >&2; exit 1; }
echo "-- tsan: canary ok (planted race reported, synchronised code clean)"
status=0
for t in forward_test live_runner_test app_core_test; do
  echo "-- tsan: $t"
  # A hang fails the tier with a message instead of stalling CI (the tests' own waits are bounded too).
  if ! timeout 1200 "build-tsan/tests/$t" --gtest_brief=1; then
    echo "tsan: $t failed (a data race is reported above as 'WARNING: ThreadSanitizer', exit 66; 124 is a timeout)" >&2
    status=1
  fi
done
exit $status
