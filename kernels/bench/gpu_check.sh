#!/usr/bin/env bash
# One device-machine call: GPU tests, benchmark, compute-sanitizer (memcheck, racecheck) on the TTT
# kernel tests in quick mode. Run from a folder holding tttlab_gpu_tests and tttlab_ttt_bench;
# logs go to $OUT (or ./out). Steps: "tests bench sanitize" by default, or name them as arguments.
set -u
OUT=${OUT:-./out}
mkdir -p "$OUT"
steps=${*:-tests bench sanitize}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
for s in $steps; do
  case $s in
    tests)
      echo "== tests"
      timeout 300 ./tttlab_gpu_tests 2>&1 > "$OUT/tests.log"; echo "tests rc=$?"
      grep -E "INFO|FAILED|PASSED|SKIPPED \]|Failure|error" "$OUT/tests.log" | head -60 ;;
    ttt-tests)
      echo "== TTT-Linear tests"
      timeout 200 ./tttlab_gpu_tests --gtest_filter='TttLinear*' 2>&1 > "$OUT/ttt-tests.log"; echo "ttt-tests rc=$?"
      grep -E "INFO|FAILED|PASSED|SKIPPED \]|Failure|error|OK \]" "$OUT/ttt-tests.log" | head -60 ;;
    bench-linear)
      echo "== bench (TTT-Linear only)"
      timeout 150 ./tttlab_ttt_bench --repeats 30 --no-mlp 2>&1 | tee "$OUT/bench-linear.log"; echo "bench rc=${PIPESTATUS[0]}" ;;
    sanitize-bwd)
      CS=/usr/local/cuda/bin/compute-sanitizer
      [ -x "$CS" ] || CS=$(command -v compute-sanitizer)
      echo "== compute-sanitizer (backward tests, quick mode) at $CS"
      for tool in memcheck racecheck; do
        TTTLAB_GPU_TEST_QUICK=1 timeout 150 "$CS" --tool $tool --error-exitcode 7 \
          ./tttlab_gpu_tests --gtest_filter='TttLinearBackward*' > "$OUT/$tool-bwd.log" 2>&1
        echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool-bwd.log" | head -8
      done ;;
    bench)
      echo "== bench"
      timeout 240 ./tttlab_ttt_bench --repeats 30 2>&1 | tee "$OUT/bench.log"; echo "bench rc=${PIPESTATUS[0]}" ;;
    bench2)
      echo "== bench (second run, spread)"
      timeout 120 ./tttlab_ttt_bench --repeats 30 --no-mlp --no-backward 2>&1 | tee "$OUT/bench2.log" ;;
    ncu)
      NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      echo "== ncu at $NCU"
      SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
      timeout 150 $NCU --clock-control none -k regex:linear_forward_v4_kernel --launch-count 2 $SEC \
        ./tttlab_ttt_bench --no-backward --no-mlp --repeats 1 --warmup 0 > "$OUT/ncu_fwd.txt" 2>&1; echo "ncu fwd rc=$?"
      timeout 150 $NCU --clock-control none -k regex:linear_backward_v2_kernel --launch-count 1 $SEC \
        ./tttlab_ttt_bench --no-mlp --repeats 1 --warmup 0 > "$OUT/ncu_bwd.txt" 2>&1; echo "ncu bwd rc=$?"
      timeout 150 $NCU --clock-control none -k regex:linear_backward_v3_kernel --launch-count 1 $SEC \
        ./tttlab_ttt_bench --no-mlp --default-only --repeats 1 --warmup 0 > "$OUT/ncu_bwd_v3.txt" 2>&1; echo "ncu bwd v3 rc=$?"
      timeout 150 $NCU --clock-control none -k regex:mlp_forward_v2_kernel --launch-count 1 $SEC \
        ./tttlab_ttt_bench --no-backward --repeats 1 --warmup 0 > "$OUT/ncu_mlp.txt" 2>&1; echo "ncu mlp rc=$?"
      grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Stall|Achieved Occupancy|Registers Per" "$OUT"/ncu_*.txt | head -40 ;;
    sanitize)
      CS=/usr/local/cuda/bin/compute-sanitizer
      [ -x "$CS" ] || CS=$(command -v compute-sanitizer)
      echo "== compute-sanitizer at $CS"
      # Every kernel test; the cuBLAS GEMM test does not finish under racecheck (cuBLAS's own kernels).
      for tool in memcheck racecheck; do
        TTTLAB_GPU_TEST_QUICK=1 timeout 240 "$CS" --tool $tool --error-exitcode 7 \
          ./tttlab_gpu_tests --gtest_filter='TttLinear*:TttMlp*:Attention*:NnOps*-NnOps.Gemm*' > "$OUT/$tool.log" 2>&1
        echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" | head -8
      done ;;
  esac
done
