#!/usr/bin/env bash
# Run 10 (backward v3), the last device call: from a folder holding a/tttlab_ttt_bench (the version
# before) and d/{tttlab_gpu_tests,tttlab_ttt_bench} (the version under test): the full GPU tests of d,
# two interleaved benchmark rounds of a and d, d at head_dim 32 and 16, the sanitizers on the backward
# tests of d in quick mode, and the stall reasons of backward v3 (ncu). Logs in $OUT.
set -u
md5sum */*
timeout 100 ./d/tttlab_gpu_tests > $OUT/tests.log 2>&1; echo "tests d rc=$?"
grep -E "INFO.*(backward|witness)|FAILED|PASSED|tests ran" $OUT/tests.log | head -20
grep -A6 "Failure" $OUT/tests.log | head -20
for r in 1 2; do for v in a d; do
  echo "== bench $v round $r" >> $OUT/bench.log
  timeout 40 ./$v/tttlab_ttt_bench --repeats 30 --no-mlp >> $OUT/bench.log 2>&1
  echo "$v r$r: $(grep -E 'backward \(g=4\) v3|forward\+backward \(g=4\) bwd v3' $OUT/bench.log | tail -2 | awk '{print $(NF-4)}' | tr '\n' ' ')"
done; done
for dim in 32 16; do
  echo "== bench d --dim $dim" >> $OUT/bench.log
  timeout 40 ./d/tttlab_ttt_bench --repeats 20 --no-mlp --dim $dim >> $OUT/bench.log 2>&1
  grep -E "backward \(g=4\) v[23]" $OUT/bench.log | tail -2
done
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  echo "== d $tool" >> $OUT/sanitize.log
  TTTLAB_GPU_TEST_QUICK=1 timeout 100 $CS --tool $tool --error-exitcode 7 ./d/tttlab_gpu_tests --gtest_filter='TttLinearBackward*' >> $OUT/sanitize.log 2>&1
  echo "d $tool rc=$?"
done
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/sanitize.log
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 60 $NCU --clock-control none -k regex:linear_backward_v3_kernel --launch-count 1 \
  --section WarpStateStats --section SchedulerStats --print-details all \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio \
  ./d/tttlab_ttt_bench --no-mlp --default-only --repeats 1 --warmup 0 > $OUT/ncu_v3_stalls.txt 2>&1; echo "ncu rc=$?"
grep -E "stalled_[a-z_]+_per_issue_active.ratio" $OUT/ncu_v3_stalls.txt | awk '{print $1, $NF}' | sort -k2 -g -r | head -12
