#!/usr/bin/env bash
# TTT-MLP forward v3 device check (run 15): MLP tests (forward and the backward reading the
# forward's checkpoints), the training tests that run the TTT-MLP forward, compute-sanitizer
# memcheck and racecheck on the forward tests in quick mode, and the benchmark at the shape
# (and d = 32). Run from the folder holding the binaries; logs to $OUT.
# Run 16: NCU=0 skips the profile; AB="bin1 bin2 ..." also times other builds of the benchmark (the
# Default kernels only, d = 64 and 32, in turn with the current one) for an A/B in the same call.
set -u
NCU=${NCU:-1}; AB=${AB:-}
OUT=${OUT:-./out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
CS=/usr/local/cuda/bin/compute-sanitizer
( for tool in memcheck racecheck; do
    TTTLAB_GPU_TEST_QUICK=1 timeout 60 $CS --tool $tool --error-exitcode 7 \
      ./tttlab_gpu_tests --gtest_filter='TttMlpForward*' > "$OUT/$tool-mlpfwd.log" 2>&1
    echo "$tool rc=$?" >> "$OUT/sanitize.txt"
  done ) &
SP=$!
timeout 80 ./tttlab_gpu_tests --gtest_filter='TttMlp*' > "$OUT/mlp-tests.log" 2>&1; echo "mlp tests rc=$?"
grep -E "INFO|FAILED|PASSED|Failure|Value of|error|OK \]|Which is|seed|trace|mlp v" "$OUT/mlp-tests.log" | head -60
timeout 60 ./tttlab_gpu_tests --gtest_filter='TrainCuda.GradientsMatch*:TrainCuda.OtherMixers*' > "$OUT/train.log" 2>&1; echo "train rc=$?"
grep -E "INFO|FAILED|PASSED|Failure|OK \]" "$OUT/train.log" | head -30
wait $SP
cat "$OUT/sanitize.txt"; for t in memcheck racecheck; do grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|Invalid|Hazard" "$OUT/$t-mlpfwd.log" | head -6; done
timeout 35 ./tttlab_ttt_bench --repeats 20 --no-backward 2>&1 | tee "$OUT/bench.log"
timeout 15 ./tttlab_ttt_bench --repeats 20 --no-backward --dim 32 2>&1 | grep -i mlp | tee "$OUT/bench-d32.log"
for round in $(seq 1 ${ROUNDS:-2}); do
  for b in $AB ./tttlab_ttt_bench; do
    for d in 64 32; do
      echo "ab round $round $b d=$d $(timeout 20 $b --repeats 20 --no-backward --default-only --dim $d 2>&1 | grep -i 'ttt-mlp forward default')"
    done
  done
done | tee "$OUT/ab.log"
[ "$NCU" = 1 ] || exit 0
# Profile of one v3 launch at the shape (stall reasons, registers, occupancy).
timeout 70 /usr/local/cuda/bin/ncu --kernel-name regex:mlp_forward_v3 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
  --section WarpStateStats --section InstructionStats \
  ./tttlab_ttt_bench --repeats 1 --warmup 0 --no-backward --default-only > "$OUT/ncu-v3.txt" 2>&1
echo "ncu rc=$?"; grep -E "Registers|Duration|Issued Ipc|Warp Cycles Per Issued|Stall|Eligible|Active Warps|One or More|No Eligible|Executed Instructions " "$OUT/ncu-v3.txt" | head -30
