#!/usr/bin/env python3
"""Compares the loss curves of `tttlab train` runs at equal steps (metrics.jsonl files).

    compare_runs.py GPU_RUN CPU_RUN [CPU_RUN_RESUMED_ON_GPU]

Prints the training loss of each run every 10 steps, the largest |GPU - CPU| over the steps both
reached, the validation losses at equal steps, and whether the curves agree within TOLERANCE nats
(the tf32 tolerance of tests/kernels/test_train_cuda.cpp). Exit status 1 when they do not.
"""
import json
import sys

TOLERANCE = 3e-2  # nats per byte, per step


def read(path):
    train, val = {}, {}
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if "loss" in j:
                train[j["step"]] = j["loss"]
            if "val_loss" in j:
                val[j["step"]] = j["val_loss"]
    return train, val


def main():
    gpu, gpu_val = read(sys.argv[1])
    cpu, cpu_val = read(sys.argv[2])
    resumed, resumed_val = read(sys.argv[3]) if len(sys.argv) > 3 else ({}, {})
    common = sorted(set(gpu) & set(cpu))
    if not common:
        print("no common steps")
        return 1
    print(f"{'step':>5} {'gpu':>9} {'cpu':>9} {'gpu-cpu':>10} {'cpu->gpu':>9}")
    for s in common:
        if s % 10 == 0 or s == common[0] or s == common[-1]:
            r = f"{resumed[s]:9.4f}" if s in resumed else ""
            print(f"{s:5d} {gpu[s]:9.4f} {cpu[s]:9.4f} {gpu[s] - cpu[s]:+10.2e} {r}")
    worst = max(abs(gpu[s] - cpu[s]) for s in common)
    print(f"steps compared: {len(common)} (1..{common[-1]}); max |gpu - cpu| = {worst:.3e} nats; tolerance {TOLERANCE}")
    for s in sorted(set(gpu_val) & set(cpu_val)):
        print(f"validation at step {s}: gpu {gpu_val[s]:.4f}, cpu {cpu_val[s]:.4f}, diff {gpu_val[s] - cpu_val[s]:+.2e}")
    after = sorted(s for s in resumed if s > common[-1] and s in gpu)
    if after:
        w2 = max(abs(resumed[s] - gpu[s]) for s in after)
        print(f"CPU run resumed on the GPU, steps {after[0]}..{after[-1]}: max |resumed - gpu run| = {w2:.3e} nats")
        for s in sorted(set(resumed_val) & set(gpu_val)):
            if s > common[-1]:
                print(f"validation at step {s}: resumed {resumed_val[s]:.4f}, gpu run {gpu_val[s]:.4f}")
    ok = worst <= TOLERANCE
    print("AGREE" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
