#!/usr/bin/env bash
# Run 16's device call for the TTT-MLP backward (split-k): MLP and training tests, compute-sanitizer
# memcheck + racecheck on the backward tests (quick mode, in the background), then the benchmark of
# the binary before the change (tttlab_ttt_bench_old) and after it, interleaved. Run from the carry
# folder holding tttlab_gpu_tests, tttlab_ttt_bench and tttlab_ttt_bench_old.
set -u
OUT=${OUT:-./out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
CS=/usr/local/cuda/bin/compute-sanitizer
( for tool in memcheck racecheck; do
    TTTLAB_GPU_TEST_QUICK=1 timeout 70 $CS --tool $tool --error-exitcode 7 \
      ./tttlab_gpu_tests --gtest_filter='TttMlpBackward*' > "$OUT/$tool.log" 2>&1
    echo "$tool rc=$?" >> "$OUT/sanitize.txt"
  done ) &
SP=$!
timeout 100 ./tttlab_gpu_tests \
  --gtest_filter='TttMlp*:TrainCuda.GradientsMatch*:TrainCuda.OtherMixers*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"
grep -E "FAILED|PASSED|Failure|Value of|OK \]|Which is|worst" "$OUT/tests.log" | head -40
wait $SP
cat "$OUT/sanitize.txt"
for t in memcheck racecheck; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$t.log" | head -4; done
for v in old new old new; do
  b=./tttlab_ttt_bench; [ $v = old ] && b=./tttlab_ttt_bench_old
  echo "== $v"; timeout 30 $b --repeats 10 --default-only 2>&1 | tee -a "$OUT/bench-$v.log"
done
