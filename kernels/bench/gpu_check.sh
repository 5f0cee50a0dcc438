#!/usr/bin/env bash
# One device-machine call that regenerates the measurements of docs/KERNELS.md ("Where it stands"):
#   tests     the GPU test suite (TTT kernels, the training step's ops, attention, whole-model
#             gradients and loss curves against the CPU engine), in groups so that a crash in one
#             leaves the others' results
#   sanitize  compute-sanitizer memcheck and racecheck on the kernel tests in quick mode
#             (TTTLAB_GPU_TEST_QUICK=1: representative shapes only; the sanitizers slow kernels 10-100x)
#   bench     `tttlab bench --device cuda`: the TTT kernels and attention at the training shape, and
#             whole-model training steps (without tttlab: `tttlab_ttt_bench`, the kernel table alone)
#   brown     `tttlab train --device cuda --preset small` on Brown, the same run on the CPU for
#             CPU_SECONDS (Ctrl-C saves it), the CPU run resumed on the GPU, the loss curves compared
#             at equal steps (compare_runs.py) and the GPU checkpoint evaluated on both devices
#   bf16      mixed precision on Brown: `tttlab train --preset small` for STEPS steps with fp32 products,
#             tf32 products and --precision bf16 (seed 1), and fp32 with seed 2 (the seed-to-seed spread
#             the bf16 difference is judged against), for TTT-Linear and TTT-MLP; compare_curves.py
#             with the bf16 tolerance of docs/KERNELS.md
#   ncu       Nsight Compute sections of the default TTT-Linear forward and backward kernels
#   family    the fast-weight family against its public peers in one call: every member's whole-model
#             training rows (`tttlab bench --device cuda --training-only --json`), the kernel rows at
#             T = 2048 and 8192 (`tttlab_ttt_bench`), flash-linear-attention's delta rules
#             (peers/delta_rule_peers.py), FLA's Titans reference and LaCT's own loop
#             (peers/fastweight_mlp_peers.py); FLA_SRC and LACT_SRC name their checkouts, PY the Python
#             with PyTorch. family_targets.py then reads the files into one JSON of the targets.
# The panel tests of `tests` read the Brown corpus at data/brown of the working tree (bash scripts/setup.sh).
# Run from a folder holding tttlab, tttlab_gpu_tests and this script (plus compare_runs.py, compare_curves.py and
# brown/{train,val}.txt for `brown` and `bf16`, tttlab_ttt_bench for `ncu`). Logs go to $OUT (or ./out). Steps: "tests sanitize bench" by
# default, or name them as arguments. The tests' random inputs come from fixed seeds;
# TTTLAB_TEST_SEED=random (or a number) draws others.
set -u
OUT=${OUT:-./out}
mkdir -p "$OUT"
cd "$(dirname "$0")"
steps=${*:-tests sanitize bench}
STEPS=${STEPS:-200}
LAYER=${LAYER:-ttt-linear}  # the Brown run's mixer: ttt-linear, ttt-mlp, linear-attention, softmax-attention
CPU_SECONDS=${CPU_SECONDS:-80}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
# cuBLAS: the toolkit's, else the one PyTorch ships.
if ! ldconfig -p | grep -q libcublas.so.13 && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  d=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$d" ] && export TTTLAB_CUBLAS="$d/libcublas.so.13" && echo "cuBLAS from $TTTLAB_CUBLAS"
fi
CS=/usr/local/cuda/bin/compute-sanitizer
[ -x "$CS" ] || CS=$(command -v compute-sanitizer)
W=$(mktemp -d)
for s in $steps; do
  case $s in
    tests)
      echo "== tests"
      : > "$OUT/tests.log"
      for f in '-NnOps*:TrainCuda*' 'NnOps*' 'TrainCuda*'; do
        timeout 240 ./tttlab_gpu_tests --gtest_filter="$f" >> "$OUT/tests.log" 2>&1; echo "tests $f rc=$?"
      done
      grep -iE "INFO|FAILED|PASSED|SKIPPED \]|Failure|Which is|actual" "$OUT/tests.log" | head -120 ;;
    sanitize)
      echo "== compute-sanitizer at $CS"
      # The kernel tests; the cuBLAS GEMM test does not finish under racecheck (cuBLAS's own kernels).
      # The family's kernels and decoders too: under racecheck those take minutes (SANITIZE_SECONDS).
      SANITIZE_FILTER='TttLinear*:TttMlp*:Attention*:FlashAttention*:MatrixRuleCuda*:NnOps*-NnOps.Gemm*'
      SANITIZE_FILTER+=':ChunkedDeltaRule*:TitansCuda*:LactCuda*:LactChunkedCuda*:LactLayerOps*:ChunkedLinearAttention*'
      SANITIZE_FILTER+=':Mamba2Cuda*:DecodeKernels*:CudaDecoder.TitansGreedy*:CudaDecoder.LactGreedy*'
      SANITIZE_FILTER+=':CudaDecoder.LinearAttentionGreedy*'
      for tool in memcheck racecheck; do
        TTTLAB_GPU_TEST_QUICK=1 timeout ${SANITIZE_SECONDS:-240} "$CS" --tool $tool --error-exitcode 7 \
          ./tttlab_gpu_tests --gtest_filter="$SANITIZE_FILTER" > "$OUT/$tool.log" 2>&1
        echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" | head -8
      done ;;
    bench)
      echo "== bench"
      if [ -x ./tttlab ]; then
        timeout 180 ./tttlab bench --device cuda 2>&1 | tee "$OUT/bench.log"; echo "bench rc=${PIPESTATUS[0]}"
      else  # the kernel table alone
        timeout 180 ./tttlab_ttt_bench --repeats 30 2>&1 | tee "$OUT/bench.log"; echo "bench rc=${PIPESTATUS[0]}"
      fi ;;
    brown)
      echo "== brown: small, $LAYER, $STEPS steps, GPU"
      common="--preset small --layer $LAYER --data brown --data-dir brown --steps $STEPS --eval-every 100 --eval-windows 64 --seed 1"
      timeout 80 ./tttlab train $common --device cuda --out "$W/gpu" > "$OUT/brown_gpu.log" 2>&1; echo "gpu rc=$?"
      tail -4 "$OUT/brown_gpu.log"
      echo "== brown: the same run on the CPU for ${CPU_SECONDS}s"
      timeout -s INT "$CPU_SECONDS" ./tttlab train $common --device cpu --out "$W/cpu" > "$OUT/brown_cpu.log" 2>&1; echo "cpu rc=$?"
      tail -3 "$OUT/brown_cpu.log"
      echo "== brown: the CPU run resumed on the GPU"
      cp -r "$W/cpu" "$W/cpu_then_gpu"
      timeout 60 ./tttlab train --resume "$W/cpu_then_gpu" --device cuda > "$OUT/brown_resume.log" 2>&1; echo "resume rc=$?"
      tail -3 "$OUT/brown_resume.log"
      python3 compare_runs.py "$W/gpu/metrics.jsonl" "$W/cpu/metrics.jsonl" "$W/cpu_then_gpu/metrics.jsonl" | tee "$OUT/brown_compare-$LAYER.txt"
      echo "== brown: the GPU run's checkpoint evaluated on the GPU and on the CPU (tttlab eval, 64 windows)"
      for dev in cuda cpu; do
        timeout 60 ./tttlab eval --checkpoint "$W/gpu" --data-dir brown --windows 64 --device $dev | grep -E "^device|^validation"
      done | tee "$OUT/eval-$LAYER.txt"
      # One archive: the device tool returns at most 8 files.
      mkdir -p "$W/brown_logs"
      for r in gpu cpu cpu_then_gpu; do cp "$W/$r/metrics.jsonl" "$W/brown_logs/${r}_metrics.jsonl"; done
      mv "$OUT"/brown_*.log "$W/brown_logs/"
      tar -czf "$OUT/brown-$LAYER.tar.gz" -C "$W" brown_logs ;;
    bf16)
      for layer in ttt-linear ttt-mlp; do
        echo "== bf16: small, $layer, $STEPS Brown steps: fp32, tf32 and bf16 products (seed 1), fp32 (seed 2)"
        common="--preset small --layer $layer --data brown --data-dir brown --steps $STEPS --eval-every 50 --eval-windows 64 --device cuda"
        timeout 150 ./tttlab train $common --seed 1 --gpu-gemm fp32 --out "$W/$layer-fp32" > "$OUT/bf16_$layer-fp32.log" 2>&1; echo "fp32 rc=$?"
        timeout 150 ./tttlab train $common --seed 1 --gpu-gemm tf32 --out "$W/$layer-tf32" > "$OUT/bf16_$layer-tf32.log" 2>&1; echo "tf32 rc=$?"
        timeout 150 ./tttlab train $common --seed 1 --precision bf16 --out "$W/$layer-bf16" > "$OUT/bf16_$layer-bf16.log" 2>&1; echo "bf16 rc=$?"
        timeout 150 ./tttlab train $common --seed 2 --gpu-gemm fp32 --out "$W/$layer-fp32-seed2" > "$OUT/bf16_$layer-seed2.log" 2>&1; echo "seed2 rc=$?"
        grep -hE "^device|tokens/s|step +$STEPS" "$OUT"/bf16_$layer-*.log | head -12
        python3 compare_curves.py --tolerance ${BF16_TOLERANCE:-5e-2} "$W/$layer-fp32/metrics.jsonl" "$W/$layer-tf32/metrics.jsonl" \
          "$W/$layer-bf16/metrics.jsonl" "$W/$layer-fp32-seed2/metrics.jsonl" | tee "$OUT/bf16_compare-$layer.txt"
        mkdir -p "$W/bf16_logs"
        for r in fp32 tf32 bf16 fp32-seed2; do cp "$W/$layer-$r/metrics.jsonl" "$W/bf16_logs/$layer-${r}_metrics.jsonl"; done
      done
      mv "$OUT"/bf16_*.log "$W/bf16_logs/" 2>/dev/null
      tar -czf "$OUT/bf16-curves.tar.gz" -C "$W" bf16_logs ;;
    ncu)
      NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      echo "== ncu at $NCU"
      SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
      for k in linear_forward_tc_kernel linear_backward_fused_kernel mlp_forward_fused_kernel; do
        timeout 150 $NCU --clock-control none -k regex:$k --launch-count 1 $SEC \
          ./tttlab_ttt_bench --default-only --repeats 1 --warmup 0 > "$OUT/ncu_$k.txt" 2>&1; echo "ncu $k rc=$?"
      done
      grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per" "$OUT"/ncu_*.txt | head -40 ;;
    family)
      PY=${PY:-python3}
      echo "== family: whole-model training rows"
      timeout 240 ./tttlab bench --device cuda --training-only --json > "$OUT/family_training.json" 2> "$OUT/family_training.err"
      echo "training rc=$?"
      echo "== family: kernel rows at T = 2048 and 8192"
      timeout 100 ./tttlab_ttt_bench --repeats 10 > "$OUT/family_kernels_2048.txt" 2>&1; echo "kernels 2048 rc=$?"
      timeout 70 ./tttlab_ttt_bench --seq 8192 --no-mlp --default-only --repeats 10 > "$OUT/family_kernels_8192.txt" 2>&1
      echo "kernels 8192 rc=$?"
      echo "== family: peers (FLA at $FLA_SRC, LaCT at $LACT_SRC)"
      PYTHONPATH="$FLA_SRC" timeout 240 "$PY" peers/delta_rule_peers.py --seq 2048 8192 --repeats 10 --lift-triton-guard \
        --json "$OUT/family_fla_delta.json" > "$OUT/family_fla_delta.txt" 2>&1; echo "fla delta rc=$?"
      timeout 90 "$PY" peers/fastweight_mlp_peers.py --lact "$LACT_SRC" --fla "$FLA_SRC" --only titans --repeats 3 \
        --max-call-s 10 > "$OUT/family_titans_peer.json" 2> "$OUT/family_titans_peer.err"; echo "titans peer rc=$?"
      timeout 40 "$PY" peers/fastweight_mlp_peers.py --lact "$LACT_SRC" --fla "$FLA_SRC" --only lact --repeats 5 \
        --max-call-s 10 > "$OUT/family_lact_peer.json" 2> "$OUT/family_lact_peer.err"; echo "lact peer rc=$?"
      # The device tool returns at most 8 files: one archive.
      tar -czf "$OUT/family.tar.gz" -C "$OUT" $(cd "$OUT" && ls family_*) && rm -f "$OUT"/family_* ;;
    *)
      echo "unknown step '$s' (tests, sanitize, bench, brown, bf16, ncu, family)"; exit 2 ;;
  esac
done
rm -rf "$W"
