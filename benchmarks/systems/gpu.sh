#!/usr/bin/env bash
# One call on a GPU machine measures opformer there (issue 39 §4), in at most about 8 minutes:
#   1. the paper's Burgers recipe (configs/burgers/gt.yaml, 100 epochs) end to end with CUDA-graph steps: wall
#      time, samples/s, test relative L2;
#   2. `opformer bench --device cuda --peers` for GT-Burgers and FNO1d at n = 512 and 8192 (batch 8), eager,
#      and opformer's steps as CUDA graphs;
#   3. DPOT-Ti and DPOT-S at 128^2 (batch 8): fp32 and bf16, eager and CUDA graphs;
#   4. then side by side: the test suite with CUDA visible, every preset's step as a CUDA graph
#      (benchmarks/systems/cuda_graphs.py) and the recipe again with TF32 products (train.matmul_precision: high).
# Usage, from the repository root: bash benchmarks/systems/gpu.sh [RESULTS_DIR]  (default
# benchmarks/results/systems/gpu; in a `device` call, where $OUT takes at most 8 files, the folder is also packed
# as $OUT/gpu.tgz after every step).
# The machine needs torch with CUDA, h5py, scipy, matplotlib, pyyaml, tqdm, pytest
# (pytest-xdist if there); wheels of what it lacks (pyamg, the peers) may lie in .whl/ (docs/bench.md says how).
# It has no internet: the data are generated here. Every step has a timeout; results are written as it goes.
set -u
RESULTS=${1:-benchmarks/results/systems/gpu}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
exec > >(tee -a "$RESULTS/log.txt") 2>&1
T0=$(date +%s)
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg

step() {  # step NAME TIMEOUT CMD...: run with a timeout into NAME.txt, log rc, seconds and the last line
  local name=$1 limit=$2; shift 2
  local start; start=$(date +%s)
  echo "== [$((start - T0))s] $name: $*"
  timeout "$limit" "$@" > "$RESULTS/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc $(($(date +%s) - start))s load $(cut -d' ' -f1-3 /proc/loadavg) :: $(grep -v '^\s*$' "$RESULTS/$name.txt" | tail -1 | cut -c1-200)" | tee -a "$RESULTS/summary.txt"
  if [ -n "${OUT:-}" ]; then tar czf "$OUT/gpu.tgz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"; fi
}

if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . || exit 1
export PATH=$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$RESULTS/device.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" | tee -a "$RESULTS/device.txt"
git rev-parse HEAD 2>/dev/null | tee -a "$RESULTS/device.txt"

step generate 90 opformer generate burgers --samples 1224 --resolution 8192 --out "$WORK/burgers.h5"

# 1. the recipe, quiet GPU
START=$(date +%s.%N)
step recipe 240 opformer train configs/burgers/gt.yaml --out "$WORK/gt" --device cuda \
  --set data.path="$WORK/burgers.h5" --set train.cuda_graphs=true
echo "recipe_wall_seconds $(python3 -c "print(round($(date +%s.%N) - $START, 1))")" | tee -a "$RESULTS/summary.txt"
cp "$WORK/gt/metrics.csv" "$RESULTS/recipe_metrics.csv" 2>/dev/null
step recipe_eval 60 opformer evaluate "$WORK/gt" --device cuda --json "$RESULTS/recipe_eval.json"

# 2. GT-Burgers and FNO1d against the peers, eager; opformer's steps as graphs
step bench_peers 150 opformer bench --device cuda --models gt_burgers,fno1d_burgers --resolutions 512,8192 \
  --batch 8 --peers --repeats 30 --warmup 5 --json "$RESULTS/bench_peers.json" --markdown "$RESULTS/bench_peers.md"
step bench_graphs 90 opformer bench --device cuda --models gt_burgers,fno1d_burgers --resolutions 512,8192 \
  --batch 8 --cuda-graphs --repeats 30 --warmup 5 --json "$RESULTS/bench_graphs.json" \
  --markdown "$RESULTS/bench_graphs.md"

# 3. DPOT-Ti and DPOT-S at 128^2: fp32 / bf16, eager / graphs
for precision in fp32 bf16; do
  for graphs in eager graphs; do
    flag=$([ $graphs = graphs ] && echo --cuda-graphs)
    step "dpot_${precision}_${graphs}" 60 opformer bench --device cuda --models dpot_ti,dpot_s --resolutions 128 \
      --batch 8 --precision $precision $flag --repeats 20 --warmup 3 \
      --json "$RESULTS/dpot_${precision}_${graphs}.json" --markdown "$RESULTS/dpot_${precision}_${graphs}.md"
  done
done

# 4. side by side: the suite with CUDA visible, every preset captured, the recipe with TF32
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
step pytest 170 python3 -m pytest -q -p no:cacheprovider $XDIST -W ignore tests &
PYTEST=$!
step cuda_graphs 150 python3 -m benchmarks.systems.cuda_graphs --results "$RESULTS" &
GRAPHS=$!
step recipe_tf32 170 opformer train configs/burgers/gt.yaml --out "$WORK/gt_tf32" --device cuda \
  --set data.path="$WORK/burgers.h5" --set train.cuda_graphs=true --set train.matmul_precision=high
cp "$WORK/gt_tf32/metrics.csv" "$RESULTS/recipe_tf32_metrics.csv" 2>/dev/null
step recipe_tf32_eval 40 opformer evaluate "$WORK/gt_tf32" --device cuda --json "$RESULTS/recipe_tf32_eval.json"
wait $PYTEST $GRAPHS
grep -E "passed|failed|error" "$RESULTS/pytest.txt" | tail -3
grep -E "^FAILED|^ERROR" "$RESULTS/pytest.txt" | head -20
echo "== [$(($(date +%s) - T0))s] done"
