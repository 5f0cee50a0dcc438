#!/usr/bin/env bash
# Run 20 (mlpbwd): variant B (paired-k loads + unpadded global state) = tttlab_gpu_tests / tttlab_ttt_bench;
# variant A (unpadded only) = *_a; main = tttlab_ttt_bench_old. Sanitizers on B, in the background.
set -u
OUT=${OUT:-./out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
CS=/usr/local/cuda/bin/compute-sanitizer
( for tool in memcheck racecheck; do
    TTTLAB_GPU_TEST_QUICK=1 timeout 55 $CS --tool $tool --error-exitcode 7 \
      ./tttlab_gpu_tests --gtest_filter='TttMlpBackward*' > "$OUT/$tool.log" 2>&1
    echo "$tool rc=$?" >> "$OUT/sanitize.txt"
  done ) &
SP=$!
SECONDS=0
timeout 60 ./tttlab_gpu_tests \
  --gtest_filter='TttMlp*:TrainCuda.GradientsMatch*:TrainCuda.OtherMixers*' > "$OUT/tests-b.log" 2>&1
echo "tests B rc=$? (${SECONDS}s)"
grep -E "FAILED|PASSED|Failure|Value of|Which is|worst" "$OUT/tests-b.log" | head -30
wait $SP
echo "sanitizers done (${SECONDS}s)"
cat "$OUT/sanitize.txt"
for t in memcheck racecheck; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$t.log" | head -4; done
for v in old a b old a b; do
  case $v in old) x=./tttlab_ttt_bench_old;; a) x=./tttlab_ttt_bench_a;; b) x=./tttlab_ttt_bench;; esac
  echo "== $v (${SECONDS}s)"; timeout 14 $x --repeats 10 --default-only 2>&1 | tee -a "$OUT/bench-$v.log" | grep -E "ttt-mlp|device"
done
echo "end (${SECONDS}s)"
