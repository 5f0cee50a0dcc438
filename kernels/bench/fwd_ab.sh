#!/usr/bin/env bash
# run 17 (fwdln): the one-round loss-gradient LN in v4/v5 (ttt_linear_v4.cu). GPU tests, A/B bench
# against main (tttlab_ttt_bench_old, built at the merge base), alternating twice; training tests;
# compute-sanitizer memcheck + racecheck on TttLinearForward* in quick mode. Run from a folder holding
# tttlab_gpu_tests, tttlab_ttt_bench and tttlab_ttt_bench_old; logs go to $OUT.
set -u
OUT=${OUT:-./out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
echo "== tests"
timeout 40 ./tttlab_gpu_tests --gtest_filter='TttLinearForward*:TttLinearDecode*:TttLinearArguments*' > "$OUT/tests.log" 2>&1; echo "tests rc=$?"
grep -E "INFO|FAILED|PASSED|Failure|OK \]" "$OUT/tests.log" | head -40
for i in 1 2; do
  for v in old new; do
    b=./tttlab_ttt_bench; [ $v = old ] && b=./tttlab_ttt_bench_old
    timeout 25 $b --repeats 30 --no-mlp --no-backward > "$OUT/bench-$v-$i.log" 2>&1; echo "bench $v $i rc=$?"
    grep -E "ttt-linear forward (v4|v5|default)" "$OUT/bench-$v-$i.log"
  done
done
echo "== train tests"
timeout 30 ./tttlab_gpu_tests --gtest_filter='TrainCuda.GradientsMatch*:TrainCuda.FiftySteps*' > "$OUT/train.log" 2>&1; echo "train rc=$?"
grep -E "FAILED|PASSED|Failure|OK \]" "$OUT/train.log" | head -20
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  TTTLAB_GPU_TEST_QUICK=1 timeout 30 $CS --tool $tool --error-exitcode 7 ./tttlab_gpu_tests --gtest_filter='TttLinearForward*' > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" | head -6
done
