#!/usr/bin/env bash
# TTT-MLP backward device check: tests, train tests, sanitizers (quick mode, concurrent), bench.
set -u
OUT=${OUT:-./out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
CS=/usr/local/cuda/bin/compute-sanitizer
( for tool in memcheck racecheck; do
    TTTLAB_GPU_TEST_QUICK=1 timeout 95 $CS --tool $tool --error-exitcode 7 \
      ./tttlab_gpu_tests --gtest_filter='TttMlp*' > "$OUT/$tool-mlp.log" 2>&1
    echo "$tool rc=$?" >> "$OUT/sanitize.txt"
  done ) &
SP=$!
timeout 95 ./tttlab_gpu_tests --gtest_filter='TttMlp*' > "$OUT/mlp-tests.log" 2>&1; echo "mlp tests rc=$?"
grep -E "INFO|FAILED|PASSED|Failure|Value of|error|OK \]|Which is|gpu " "$OUT/mlp-tests.log" | head -70
timeout 85 ./tttlab_gpu_tests --gtest_filter='TrainCuda.GradientsMatch*:TrainCuda.TttMlp*:TrainCuda.Unsupported*' > "$OUT/train.log" 2>&1; echo "train rc=$?"
grep -E "INFO|FAILED|PASSED|Failure|OK \]" "$OUT/train.log" | head -40
wait $SP
cat "$OUT/sanitize.txt"; for t in memcheck racecheck; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$t-mlp.log" | head -5; done
timeout 45 ./tttlab_ttt_bench --repeats 20 --default-only 2>&1 | tee "$OUT/bench.log"
