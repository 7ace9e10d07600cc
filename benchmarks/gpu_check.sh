#!/usr/bin/env bash
# The GPU path measured in one call on a lent GPU machine (an H100 or H200 with PyTorch in its
# python3): the release sweep on a random-weight 1.3B Llama (8 of the 55 targets: seconds per
# target x 55 estimates the whole sweep), the demo end to end on CUDA, and a 7B LoRA sweep on two
# targets. Each step has its own time cap so that one slow step cannot eat the others.
#
#   OUT=/some/folder bash benchmarks/gpu_check.sh        # results: $OUT/*.json, $OUT/*.log
#
# Python packages the image lacks travel as wheels in .whl/ (see docs/benchmarks.md).
set -u
OUT=${OUT:-./gpu-check}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_check: installing the carried wheels failed"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'cuda', torch.cuda.is_available())" | tee -a "$OUT/gpu.txt"

step() {  # step NAME CAP_SECONDS COMMAND...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  timeout "$cap" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/steps.txt"
  tail -n 3 "$OUT/$name.log"
}

step sweep13b "${CAP_13B:-170}" python3 benchmarks/gpu_sweep.py --config 1.3b --targets 8 --ref-points 3 --out "$OUT/gpu-1.3b.json"
step demo "${CAP_DEMO:-150}" python3 -m deepunlearn demo -o /tmp/gpu-demo --quiet --json
cp /tmp/gpu-demo/report/report.md "$OUT/demo-report.md" 2>/dev/null
step lora7b "${CAP_7B:-150}" python3 benchmarks/gpu_sweep.py --config 7b --lora --targets 2 --ref-points 1 --out "$OUT/gpu-7b-lora.json"
python3 - "$OUT" <<'EOF'
import json, sys, pathlib
for name in ("gpu-1.3b.json", "gpu-7b-lora.json"):
    p = pathlib.Path(sys.argv[1]) / name
    if not p.exists():
        print(name, "missing"); continue
    r = json.loads(p.read_text())
    g = r["gpu_limits"]
    print(f"{name}: {r['device_name']} {r['params']/1e9:.2f}B {r['dtype']} lora={r['lora']} targets={r['targets']} "
          f"points={r['points']} s/target={r['seconds_per_target']:.1f} x55={55*r['seconds_per_target']/60:.1f} min "
          f"probe facts/s={r['probed_facts_per_s']:.0f} peak={r['peak_gib']:.1f} GiB plan={r['plan_peak_gib']:.1f} GiB "
          f"train/limit={g['train_ratio']:.1f} probe/limit={g['probe_ratio']:.1f} "
          f"ref/ours={r['reference_protocol'].get('ratio_to_ours', float('nan')):.1f}")
EOF
