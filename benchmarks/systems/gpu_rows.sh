#!/usr/bin/env bash
# The papers' rows that need a GPU, at the papers' scale, a few per lent session (docs/papers/*.md marks them
# "GPU script ready, not run" until their results are committed). Each call runs the next rows in this priority
# order, each in about 8 minutes of device time (data generation on the device included):
#   1. kolmogorov64       FactFormer-LM and FNO2d-LM on Kolmogorov flow at 64^2 (Li et al. 2023, Table 1)
#   2. darcy141           Galerkin Transformer, forward Darcy at 141 (Cao 2021, Table 2b)
#   3. smoke64            FactFormer-LM and FNO3d-LM on 3D smoke at 64^3 (Li et al. 2023, Table 3)
#   4. turbulence32       FactFormer-LM and FNO3d-LM on 3D turbulence at 32^3 (Li et al. 2023, Table 2)
#   5. dpot_ti            DPOT-Ti pre-trained on a two-member mixture, then fine-tuned against scratch on a held-out
#                         viscosity (Hao et al. 2024, Table 2's direction)
#   6. inverse_darcy141   Galerkin Transformer, inverse Darcy at (141, 36), eps = 0.01 (Cao 2021, Table 3)
#   7. burgers_seeds      Galerkin Transformer on Burgers, the paper's recipe with seeds 1..10, then the same seeds
#                         with the authors' attention dropout of half of K^T V in training (Cao 2021, Figure 8b: on
#                         the CPU 2 of 5 seeds diverged, docs/training.md, "A finite loss spike")
#   8. geo_fno_elasticity, geo_fno_airfoil, geo_fno_pipe  GT on meshes (quadrature-weighted) and Transolver (the
#                         authors' configuration) on Geo-FNO's published files (Transolver Table 1): only where
#                         GEO_FNO_DIR holds them (they cannot be downloaded on the lent machines: these rows are "not
#                         run" until someone with the files runs them); plasticity holds trajectories on a mesh, which
#                         the mesh loader does not train (operator splits only): no row
# Rows not yet run come first; then rows cut short by their time limit resume (their run folders come back), then
# rows that failed are tried again.
#
# Usage, from the repository root: bash benchmarks/systems/gpu_rows.sh [RESULTS_DIR]
#   RESULTS_DIR (default benchmarks/results/gpu_rows) holds state.txt, one line per row run ("ROW done", "ROW
#   partial" or "ROW failed", the date and the device), and a folder per row: its training logs, metrics.csv of
#   each run, evaluation JSON, the learning curves (benchmarks.papers.curves: ROW_curves.png/json/md) and
#   device.txt. Commit that folder after a call so that the next call takes the next rows.
# Environment: ROWS (rows this call, default 2), TRAIN_S (seconds of training per run, default 300), SEEDS (of
#   burgers_seeds, default 10), PARALLEL (its runs at a time on the one device, default 10), SMALL=1 (a dry
#   run on the CPU: every row on tiny data for 1 epoch, to test the script without a GPU), CARRIED (folder of run
#   folders given back from an earlier call, default .gpu_rows: ROW.runs.tgz.part-* as this script wrote them).
# In a `device` call ($OUT set, at most 8 files of 16 MiB come back) the results folder is packed as
#   $OUT/gpu_rows.tgz after every step, and a row's run folders, when they fit, as $OUT/ROW.runs.tgz.part-*
#   (15 MiB pieces): carry them back as .gpu_rows/ to resume a row cut short.
set -u
RESULTS=${1:-benchmarks/results/gpu_rows}
ROWS=${ROWS:-2}
TRAIN_S=${TRAIN_S:-300}
SMALL=${SMALL:-0}
SEEDS=${SEEDS:-10}
PARALLEL=${PARALLEL:-10}
CARRIED=${CARRIED:-.gpu_rows}
ORDER=(kolmogorov64 darcy141 smoke64 turbulence32 dpot_ti inverse_darcy141 burgers_seeds)
if [ -n "${GEO_FNO_DIR:-}" ]; then ORDER+=(geo_fno_elasticity geo_fno_airfoil geo_fno_pipe); fi
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
STATE=$RESULTS/state.txt
touch "$STATE"
exec > >(tee -a "$RESULTS/log.txt") 2>&1
T0=$(date +%s)
WORK=/tmp/gpu_rows   # fixed: a resumed run finds its data where its run.json says
DATA=$WORK/data
mkdir -p "$DATA" "$WORK/runs"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
PY=${PY:-python3}

pack() {  # the results folder into $OUT (a device call)
  if [ -n "${OUT:-}" ]; then tar czf "$OUT/gpu_rows.tgz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"; fi
}

step() {  # step ROW NAME TIMEOUT CMD...: run with a timeout into ROW/NAME.txt; log rc, seconds and the last line
  local row=$1 name=$2 limit=$3; shift 3
  local start; start=$(date +%s)
  mkdir -p "$RESULTS/$row"
  echo "== [$((start - T0))s] $row/$name: $*"
  timeout "$limit" "$@" > "$RESULTS/$row/$name.txt" 2>&1
  local rc=$?
  local last; last=$(grep -v '^\s*$' "$RESULTS/$row/$name.txt" | tail -1 | cut -c1-200)
  echo "$row/$name rc=$rc $(($(date +%s) - start))s :: $last" \
    | tee -a "$RESULTS/summary.txt"
  pack
  return $rc
}

# $PY "$GENERATE" PDE FILE SAMPLES [FLAG=VALUE ...]: opformer's generator, solved by this machine's cores
GENERATE=$WORK/generate.py
cat > "$GENERATE" <<'EOF'
"""`opformer generate` solves trajectories with 2 threads; here the generator's own `workers` (threads; the
samples do not depend on them) is the machine's cores, and a chunk is one batch per thread."""
import dataclasses, functools, inspect, os, sys
from opformer.data.generate import generate_file
from opformer.pde import registry

name, out, samples, *flags = sys.argv[1:]
if os.path.exists(out):
    sys.exit(print(out, "exists"))
entry = registry.PDES[name]
parameters = inspect.signature(entry.generator).parameters
settings = {key: registry.FLAGS[key].type(value) for key, value in (flag.split("=", 1) for flag in flags)}
chunk = None
if "workers" in parameters and "workers" not in entry.flags:
    threads = os.cpu_count() or 2
    registry.PDES[name] = dataclasses.replace(entry, generator=functools.partial(entry.generator, workers=threads))
    chunk = threads * parameters["batch_size"].default
elif "workers" in entry.flags:
    settings["workers"] = os.cpu_count() or 2
print(generate_file(name, out, int(samples), chunk=chunk, **settings))
EOF

unpack_carried() {  # unpack_carried ROW: a row's run folders given back from an earlier call
  if compgen -G "$CARRIED/$1.runs.tgz.part-*" > /dev/null; then
    cat "$CARRIED/$1".runs.tgz.part-* | tar xzf - -C "$WORK/runs" && echo "resuming $1 from $CARRIED"
  fi
}

give_back_runs() {  # give_back_runs ROW RUN...: the runs' folders as 15 MiB pieces in $OUT, where they fit
  local row=$1; shift
  [ -n "${OUT:-}" ] || return 0
  local archive=$WORK/$row.runs.tgz
  tar czf "$archive" -C "$WORK/runs" "$@"
  local pieces=$(( ($(stat -c %s "$archive") + 15728639) / 15728640 ))
  local free=$(( 8 - $(find "$OUT" -maxdepth 1 -type f | wc -l) - 1 ))  # keep one file for gpu_rows.tgz
  [ -f "$OUT/gpu_rows.tgz" ] && free=$((free + 1))
  if [ "$pieces" -le "$free" ]; then
    split -b 15m "$archive" "$OUT/$row.runs.tgz.part-"
    echo "$row: run folders in $pieces pieces in \$OUT" | tee -a "$RESULTS/summary.txt"
  else
    echo "$row: run folders ($pieces pieces of 15 MiB) do not fit the $free files left" | tee -a "$RESULTS/summary.txt"
  fi
}

train() {  # train ROW RUN CONFIG [--set ...]: train (or resume) RUN for at most TRAIN_S seconds; 0 if it finished
  local row=$1 run=$2 config=$3; shift 3
  local dir=$WORK/runs/$run
  if [ -f "$dir/last.pt" ]; then
    step "$row" "train_$run" "$TRAIN_S" $PY -m opformer train --resume "$dir" --device "$DEVICE"
  else
    rm -rf "$dir"  # a run stopped before its first epoch ended has nothing to resume
    step "$row" "train_$run" "$TRAIN_S" $PY -m opformer train "$config" --out "$dir" --device "$DEVICE" "$@" $SETS
  fi
  local rc=$?
  cp "$dir/metrics.csv" "$RESULTS/$row/$run.metrics.csv" 2>/dev/null
  return $rc
}

evaluate() {  # evaluate ROW RUN [ARGS...]: the run's best checkpoint on its test split, JSON into the row's folder
  local row=$1 run=$2; shift 2
  step "$row" "evaluate_$run" 300 $PY -m opformer evaluate "$WORK/runs/$run" --device "$DEVICE" \
    --json "$RESULTS/$row/$run.eval.json" "$@"
}

curves() {  # curves ROW RUN...: learning curves and the convergence criterion of the row's runs
  local row=$1; shift
  local dirs=(); for run in "$@"; do dirs+=("$WORK/runs/$run"); done
  step "$row" curves 120 $PY -m benchmarks.papers.curves "${dirs[@]}" --name "${row}_curves" --results "$RESULTS/$row"
}

finish() {  # finish ROW STATUS RUN...: curves, the runs given back, the row's line in state.txt
  local row=$1 status=$2; shift 2
  curves "$row" "$@"
  [ "$status" = partial ] && give_back_runs "$row" "$@"
  sed -i "/^$row /d" "$STATE"
  echo "$row $status $(date -u +%FT%TZ) $(head -1 "$RESULTS/device.txt")" >> "$STATE"
  pack
}

status() {  # status RC...: a row's state from its trainings' exit codes: done, partial (a time limit) or failed
  local rc result=done
  for rc in "$@"; do
    if [ "$rc" -eq 124 ] && [ $result = done ]; then result=partial; fi
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then result=failed; fi
  done
  echo $result
}

both() {  # both ROW RUN_A CONFIG_A RUN_B CONFIG_B [--set ...]: two runs side by side on the one device; the status
  local row=$1 a=$2 config_a=$3 b=$4 config_b=$5; shift 5
  train "$row" "$a" "$config_a" "$@" >&2 & local pa=$!
  train "$row" "$b" "$config_b" "$@" >&2 & local pb=$!
  wait $pa; local ra=$?; wait $pb; local rb=$?
  status $ra $rb
}

seeds() {  # seeds ROW NAME CONFIG [--set ...]: runs NAME_seedS of the config, S = 1..SEEDS, PARALLEL at a time on
  # the one device; the status
  local row=$1 name=$2 config=$3; shift 3
  local pids=() rcs=() s
  for s in $(seq 1 "$SEEDS"); do
    train "$row" "${name}_seed$s" "$config" --set seed="$s" "$@" >&2 & pids+=($!)
    if [ ${#pids[@]} -ge "$PARALLEL" ]; then wait "${pids[0]}"; rcs+=($?); pids=("${pids[@]:1}"); fi
  done
  for s in "${pids[@]}"; do wait "$s"; rcs+=($?); done
  status "${rcs[@]}"
}

# The rows. SETS holds the CPU dry run's shrinking (empty on a GPU); each row's data are the papers' where a device
# call's 8 minutes allow, and the row's folder says what it ran.

row_kolmogorov64() {
  local n=${KOLMOGOROV_SAMPLES:-80} split="--set data.n_train=56 --set data.n_val=12 --set data.n_test=12"
  local file=$DATA/kolmogorov.h5 res=64 solve=128
  if [ "$SMALL" = 1 ]; then n=6 res=16 solve=16 split="--set data.n_train=2 --set data.n_val=2 --set data.n_test=2"; fi
  step kolmogorov64 generate 420 $PY "$GENERATE" kolmogorov "$file" "$n" resolution=$res \
    solve_resolution=$solve t_final=4 \
    || return 1
  local state; state=$(both kolmogorov64 kolmogorov_factformer_lm configs/factformer/kolmogorov_factformer_lm.yaml \
    kolmogorov_fno2d_lm configs/factformer/kolmogorov_fno2d_lm.yaml \
    --set data.path="$file" $split --set train.epochs=${KOLMOGOROV_EPOCHS:-300})
  evaluate kolmogorov64 kolmogorov_factformer_lm; evaluate kolmogorov64 kolmogorov_fno2d_lm
  finish kolmogorov64 "$state" kolmogorov_factformer_lm kolmogorov_fno2d_lm
}

darcy_data() {  # the 1224 Darcy samples solved at 141 nodes (the paper's 421, subsampled, takes ~5 min here)
  DARCY=$DATA/darcy_141.h5 DARCY_SPLIT=""
  local n=1224 res=141
  if [ "$SMALL" = 1 ]; then
    n=8 res=29 DARCY_SPLIT="--set data.n_train=4 --set data.n_val=2 --set data.n_test=2 --set model.coarse_size=8"
  fi
  step "$1" generate 420 $PY "$GENERATE" darcy "$DARCY" $n resolution=$res
}

row_darcy141() {
  darcy_data darcy141 || return 1
  local res=141; [ "$SMALL" = 1 ] && res=29
  train darcy141 darcy_gt_141 configs/darcy/gt_141.yaml --set data.path="$DARCY" --set data.resolution=$res \
    $DARCY_SPLIT >&2
  local rc=$? state; state=$(status $rc)
  evaluate darcy141 darcy_gt_141
  finish darcy141 "$state" darcy_gt_141
}

row_smoke64() {
  local n=${SMOKE_SAMPLES:-32} file=$DATA/smoke3d_64.h5 res=64
  local split="--set data.n_train=24 --set data.n_val=4 --set data.n_test=4"
  if [ "$SMALL" = 1 ]; then n=6 res=16 split="--set data.n_train=2 --set data.n_val=2 --set data.n_test=2"; fi
  step smoke64 generate 420 $PY "$GENERATE" smoke3d "$file" "$n" resolution=$res || return 1
  local state; state=$(both smoke64 smoke3d_64_factformer_lm configs/factformer/smoke3d_64_factformer_lm.yaml \
    smoke3d_64_fno3d_lm configs/factformer/smoke3d_64_fno3d_lm.yaml --set data.path="$file" $split)
  evaluate smoke64 smoke3d_64_factformer_lm; evaluate smoke64 smoke3d_64_fno3d_lm
  finish smoke64 "$state" smoke3d_64_factformer_lm smoke3d_64_fno3d_lm
}

row_turbulence32() {
  local n=140 file=$DATA/turbulence3d_32.h5 res=32 split=""
  if [ "$SMALL" = 1 ]; then n=6 res=16 split="--set data.n_train=2 --set data.n_val=2 --set data.n_test=2"; fi
  step turbulence32 generate 420 $PY "$GENERATE" turbulence3d "$file" "$n" resolution=$res || return 1
  local state; state=$(both turbulence32 turbulence3d_factformer_lm configs/factformer/turbulence3d_factformer_lm.yaml \
    turbulence3d_fno3d_lm configs/factformer/turbulence3d_fno3d_lm.yaml --set data.path="$file" $split \
    --set train.epochs=${TURBULENCE_EPOCHS:-40})
  evaluate turbulence32 turbulence3d_factformer_lm; evaluate turbulence32 turbulence3d_fno3d_lm
  finish turbulence32 "$state" turbulence3d_factformer_lm turbulence3d_fno3d_lm
}

row_dpot_ti() {
  local n=80 res=64 split="--set data.n_train=60 --set data.n_val=10 --set data.n_test=10" windows=2000 tuned=""
  local held_out=(nu=1e-4 t_final=30 solve_resolution=128 dt=0.005)
  if [ "$SMALL" = 1 ]; then
    n=14 res=32 split="--set data.n_train=10 --set data.n_val=2 --set data.n_test=2" held_out=(nu=1e-3 t_final=22)
    windows=4 tuned="--set data.n_train=2 --set data.n_val=2 --set data.n_test=2"
  fi
  step dpot_ti generate_a 300 $PY "$GENERATE" navier-stokes "$DATA/ns_1e-3.h5" $n resolution=$res nu=1e-3 \
    t_final=30 || return 1
  step dpot_ti generate_b 300 $PY "$GENERATE" shallow-water "$DATA/swe.h5" $n resolution=$res || return 1
  step dpot_ti generate_held_out 300 $PY "$GENERATE" navier-stokes "$DATA/ns_held_out.h5" $n resolution=$res \
    "${held_out[@]}" || return 1
  local mixture="[{path: $DATA/ns_1e-3.h5, weight: 1}, {path: $DATA/swe.h5, weight: 3}]"
  train dpot_ti dpot_ti_pretrain configs/mixture/dpot_micro.yaml --set model.preset=dpot_ti \
    --set "data.mixture=$mixture" --set data.resolution=128 $split --set data.windows_per_epoch=$windows \
    --set train.epochs=${DPOT_EPOCHS:-10}
  local pretrained=$?
  # fine-tuned on the held-out data's own grid: the pre-trained positional embedding is resampled to it
  local common=(--set model.preset=dpot_ti --set data.path="$DATA/ns_held_out.h5" --set model.grid_size=$res
                --set rollout.time_stride=1 --set train.epochs=${FINETUNE_EPOCHS:-20} $split $tuned)
  train dpot_ti dpot_ti_finetune configs/kolmogorov/dpot_micro_finetune.yaml "${common[@]}" \
    --set init.checkpoint="$WORK/runs/dpot_ti_pretrain" & local pf=$!
  train dpot_ti dpot_ti_scratch configs/kolmogorov/dpot_micro_finetune.yaml "${common[@]}" --set 'init={}' &
  local ps=$!
  wait $pf; local finetuned=$?
  wait $ps; local scratch=$?
  local state; state=$(status $pretrained $finetuned $scratch)
  for run in dpot_ti_pretrain dpot_ti_finetune dpot_ti_scratch; do evaluate dpot_ti $run; done
  finish dpot_ti "$state" dpot_ti_pretrain dpot_ti_finetune dpot_ti_scratch
}

row_inverse_darcy141() {
  darcy_data inverse_darcy141 || return 1
  local res=141 coarse=36; [ "$SMALL" = 1 ] && res=29 coarse=8
  # benchmarks/papers/galerkin/darcy.py's peak rate for the inverse GT: the paper's 1e-3 diverged at (85, 29)
  # (docs/papers/galerkin-transformer.md, "Darcy flow")
  train inverse_darcy141 inverse_gt_141 configs/darcy_inverse/gt_141.yaml --set data.path="$DARCY" \
    --set data.resolution=$res --set data.target_resolution=$coarse --set optim.lr=2.5e-4 $DARCY_SPLIT >&2
  local rc=$? state; state=$(status $rc)
  evaluate inverse_darcy141 inverse_gt_141
  finish inverse_darcy141 "$state" inverse_gt_141
}

row_burgers_seeds() {
  local n=1224 res=8192 split="" file=$DATA/burgers.h5 runs=() s
  if [ "$SMALL" = 1 ]; then
    n=8 res=256 split="--set data.n_train=4 --set data.n_val=2 --set data.n_test=2 --set data.resolution=64"
  fi
  step burgers_seeds generate 300 $PY "$GENERATE" burgers "$file" $n resolution=$res || return 1
  local common=(--set data.path="$file" $split); [ "$SMALL" = 1 ] || common+=(--set train.cuda_graphs=true)
  local plain; plain=$(seeds burgers_seeds gt configs/burgers/gt.yaml "${common[@]}")
  # their attention: F.dropout(K^T V / n) at p = 0.5 (libs/layers.py, linear_attention); opformer's in training only
  local dropped; dropped=$(seeds burgers_seeds gt_kv_dropout configs/burgers/gt_kv_dropout.yaml "${common[@]}")
  for s in $(seq 1 "$SEEDS"); do runs+=("gt_seed$s" "gt_kv_dropout_seed$s"); done
  for s in "${runs[@]}"; do evaluate burgers_seeds "$s"; done  # at the training grid (n = 512)
  local state=done; [ "$plain" = done ] && [ "$dropped" = done ] || state=partial
  [ "$plain" = failed ] || [ "$dropped" = failed ] && state=failed
  finish burgers_seeds "$state" "${runs[@]}"
}

row_geo_fno() {  # row_geo_fno LAYOUT FILE...: GEO_FNO_DIR's files converted, GT on meshes and Transolver side by side
  local layout=$1; shift
  local row=geo_fno_$layout file=$DATA/geo_fno_$layout.h5 paths=() f
  for f in "$@"; do paths+=("$GEO_FNO_DIR/$f"); done
  [ -f "$file" ] || step $row convert 420 $PY -m opformer convert geo-fno "${paths[@]}" --out "$file" || return 1
  local state; state=$(both $row ${row}_gt configs/mesh/${row}_gt.yaml ${row}_transolver \
    configs/mesh/${row}_transolver.yaml --set data.path="$file")
  evaluate $row ${row}_gt; evaluate $row ${row}_transolver
  finish $row "$state" ${row}_gt ${row}_transolver
}
row_geo_fno_elasticity() { row_geo_fno elasticity Random_UnitCell_XY_10.npy Random_UnitCell_sigma_10.npy; }
row_geo_fno_airfoil() { row_geo_fno airfoil NACA_Cylinder_X.npy NACA_Cylinder_Y.npy NACA_Cylinder_Q.npy; }
row_geo_fno_pipe() { row_geo_fno pipe Pipe_X.npy Pipe_Y.npy Pipe_Q.npy; }

# The machine.
if [ "$SMALL" = 1 ]; then
  DEVICE=cpu
  SETS="--set train.epochs=1 --set train.batch_size=2 --set train.eval_batch_size=2"
  export CUDA_VISIBLE_DEVICES=""
  echo "cpu dry run (SMALL=1): tiny data, 1 epoch" > "$RESULTS/device.txt"
else
  DEVICE=cuda
  SETS=""
  if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  $PY -m pip install -q --no-deps --no-build-isolation --no-index -e . || exit 1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RESULTS/device.txt"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >> "$RESULTS/device.txt"
fi
git rev-parse HEAD 2>/dev/null >> "$RESULTS/device.txt"
cat "$RESULTS/device.txt"

# The next rows: those never run, in priority order, then those cut short.
next=()
for row in "${ORDER[@]}"; do grep -q "^$row " "$STATE" || next+=("$row"); done
for row in "${ORDER[@]}"; do grep -Eq "^$row (partial|failed)" "$STATE" && next+=("$row"); done
ran=0
for row in "${next[@]}"; do
  [ "$ran" -ge "$ROWS" ] && break
  echo "== [$(($(date +%s) - T0))s] row $row"
  unpack_carried "$row"
  "row_$row"
  ran=$((ran + 1))
done
echo "== [$(($(date +%s) - T0))s] done: $ran rows; state:"; cat "$STATE"
pack
