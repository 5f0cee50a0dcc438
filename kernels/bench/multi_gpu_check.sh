#!/usr/bin/env bash
# One device-machine call that makes the measurements of docs/MULTI_GPU.md on a host with several GPUs:
#   tests     the GPU tests of the data-parallel path (MultiGpu.*) and of the single-GPU step (TrainCuda.*)
#   curves    the 125m shape on Brown, global batch 16 x 2048, 100 steps, on 1 GPU (the plain step), on
#             1 GPU through the data-parallel path, on 2 and on N GPUs; then 2 processes x N/2 GPUs through
#             the TCP rendezvous, and N processes x 1 GPU started as torchrun would (WORLD_SIZE, RANK,
#             LOCAL_RANK) through a file rendezvous; every curve compared with the one-GPU curve
#   failure   N GPUs with rank 1 made to fail at step 60 (TTTLAB_FAIL_RANK_AT_STEP): the error, the
#             checkpoint of step 50 intact, the run resumed on 2 GPUs to step 100 and compared; then a
#             job of 2 processes whose second process is killed (SIGKILL): the first must stop with an
#             error within TTTLAB_COLLECTIVE_TIMEOUT
#   bench     `tttlab bench --device cuda --gpus N` (TTT-Linear and TTT-MLP): the scaling efficiency
# Run from a folder holding tttlab, tttlab_gpu_tests, compare_curves.py, compare_runs.py and brown/{train,val}.txt. Logs
# go to $OUT (or ./out). Steps: all four by default, or name them as arguments.
set -u
OUT=${OUT:-./out}
mkdir -p "$OUT"
cd "$(dirname "$0")"
steps=${*:-tests curves failure bench}
# NVLink multicast stays off (the device machines ask it; NCCL would not use it at these sizes).
export NCCL_NVLS_ENABLE=0
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
# cuBLAS and NCCL: the toolkit's, else the ones PyTorch ships.
if ! ldconfig -p | grep -q libcublas.so.13 && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  d=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$d" ] && export TTTLAB_CUBLAS="$d/libcublas.so.13"
fi
if ! ldconfig -p | grep -q libnccl.so.2 && [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
  d=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$d" ] && export TTTLAB_NCCL="$d/libnccl.so.2"
fi
echo "GPUs: $N; cuBLAS: ${TTTLAB_CUBLAS:-system}; NCCL: ${TTTLAB_NCCL:-system}"
# WORK (optional) keeps the runs between calls on a warm machine (the failure step compares with the
# one-GPU run of the curves step).
W=${WORK:-$(mktemp -d)}
mkdir -p "$W"
common="--preset 125m --layer ttt-linear --data brown --data-dir brown --batch 16 --seq-len 2048 --steps 100
        --eval-every 50 --eval-windows 16 --checkpoint-every 50 --seed 3"
for s in $steps; do
  case $s in
    tests)
      echo "== tests"
      timeout 400 ./tttlab_gpu_tests --gtest_filter='MultiGpu*:TrainCuda*' > "$OUT/tests.log" 2>&1; echo "tests rc=$?"
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |GPUs: losses|NCCL|Failure|Skipped|OK \] MultiGpu|FAILED  \]" "$OUT/tests.log" | head -40 ;;
    curves)
      echo "== curves: 125m TTT-Linear, 16 x 2048 per step, 100 steps"
      timeout 200 ./tttlab train $common --device cuda --out "$W/one" > "$W/one.log" 2>&1; echo "1 GPU rc=$?"
      for g in 1 2 $N; do
        timeout 200 ./tttlab train $common --gpus $g --out "$W/gpus$g" > "$W/gpus$g.log" 2>&1; echo "--gpus $g rc=$?"
        grep -E "^device|^done|per GPU" "$W/gpus$g.log" | tail -3
      done
      half=$((N / 2))
      for p in 0 1; do
        TTTLAB_PROCESSES=2 TTTLAB_PROCESS_RANK=$p TTTLAB_LOCAL_RANK=$p TTTLAB_RENDEZVOUS=tcp:127.0.0.1:29511 \
          timeout 200 ./tttlab train $common --gpus $half --out "$W/tcp" > "$W/tcp$p.log" 2>&1 &
      done
      wait; echo "2 processes x $half GPUs (tcp): $(tail -1 "$W/tcp0.log") | $(tail -1 "$W/tcp1.log")"
      for p in $(seq 0 $((N - 1))); do
        WORLD_SIZE=$N RANK=$p LOCAL_RANK=$p TTTLAB_RENDEZVOUS=file:$W/nccl-id \
          timeout 200 ./tttlab train $common --gpus 1 --out "$W/file" > "$W/file$p.log" 2>&1 &
      done
      wait; echo "$N processes x 1 GPU (file, torchrun variables): $(tail -1 "$W/file0.log") | $(tail -1 "$W/file1.log")"
      head -12 "$W/file1.log"
      python3 compare_curves.py "$W/one/metrics.jsonl" "$W/gpus1/metrics.jsonl" "$W/gpus2/metrics.jsonl" \
        "$W/gpus$N/metrics.jsonl" "$W/tcp/metrics.jsonl" "$W/file/metrics.jsonl" | tee "$OUT/curves.txt"
      mkdir -p "$W/logs"; for r in one gpus1 gpus2 gpus$N tcp file; do cp "$W/$r/metrics.jsonl" "$W/logs/$r.jsonl"; done
      cp "$W"/*.log "$W/logs/" ;;
    failure)
      echo "== failure: $N GPUs, rank 1 fails at step 60"
      TTTLAB_FAIL_RANK_AT_STEP=1:60 timeout 200 ./tttlab train $common --gpus $N --out "$W/fail" > "$W/fail.log" 2>&1
      echo "rc=$? (expected 1)"; tail -3 "$W/fail.log"; echo "latest: $(cat "$W/fail/latest")"
      timeout 200 ./tttlab train --resume "$W/fail" --gpus 2 > "$W/fail_resume.log" 2>&1; echo "resumed on 2 GPUs rc=$?"
      tail -2 "$W/fail_resume.log"
      python3 compare_curves.py "$W/one/metrics.jsonl" "$W/fail/metrics.jsonl" | tee "$OUT/failure.txt"
      echo "== failure: 2 processes, the second killed"
      for p in 0 1; do
        TTTLAB_COLLECTIVE_TIMEOUT=20 TTTLAB_PROCESSES=2 TTTLAB_PROCESS_RANK=$p TTTLAB_LOCAL_RANK=$p \
          TTTLAB_RENDEZVOUS=tcp:127.0.0.1:29512 timeout 200 ./tttlab train $common --gpus 1 --out "$W/killed" \
          > "$W/killed$p.log" 2>&1 &
        pids[$p]=$!
      done
      # Kill the second process once the job is past step 20 (and past no checkpoint: the first is at 50).
      for i in $(seq 120); do grep -q "step 20/100" "$W/killed0.log" 2>/dev/null && break; sleep 0.5; done
      # SIGKILL to tttlab itself, not to the `timeout` around it.
      pkill -9 -P ${pids[1]}; t0=$SECONDS; wait ${pids[0]}; echo "process 0 rc=$? $((SECONDS - t0)) s after the kill"
      tail -3 "$W/killed0.log"; echo "latest: $(cat "$W/killed/latest" 2>/dev/null)"
      mkdir -p "$W/logs"; cp "$W"/fail*.log "$W"/killed*.log "$W/logs/" 2>/dev/null ;;
    bench)
      echo "== bench"
      for layer in ttt-linear ttt-mlp; do
        timeout 300 ./tttlab bench --device cuda --gpus $N --layer $layer --json > "$OUT/bench-$layer.json" 2>"$OUT/bench-$layer.err"
        echo "$layer rc=$?"; cat "$OUT/bench-$layer.err"
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [print(r["layer"], r["gpus"], "GPUs: %.2f ms (%.2f-%.2f), %.0f tokens/s, %.0f per GPU, efficiency %.1f%%" % (r["median_ms"], r["min_ms"], r["max_ms"], r["tokens_per_s"], r["tokens_per_s_per_gpu"], 100*r["scaling_efficiency"])) for r in d["scaling"]]' "$OUT/bench-$layer.json"
      done ;;
    *)
      echo "unknown step '$s' (tests, curves, failure, bench)"; exit 2 ;;
  esac
done
[ -d "$W/logs" ] && tar -czf "$OUT/multi_gpu_logs.tar.gz" -C "$W" logs
[ -z "${WORK:-}" ] && rm -rf "$W"
