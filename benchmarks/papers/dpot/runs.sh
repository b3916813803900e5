#!/bin/bash
# The trainings behind issue 29 §4 (benchmarks/papers/dpot/tables.py collects their results into
# benchmarks/results/papers/dpot/tables.*). Resumable: a finished run is skipped, a started one resumed from its last
# checkpoint (kill -9 safe), a missing one started. Each run's start, end, seconds and load averages go to
# $RUNS/runs.log.
# Run it from a frozen copy of the tree (PYTHONPATH=/frozen/src) with the working directory at the repository
# root that holds data/mixture/ (benchmarks/papers/dpot/generate_mixture.sh):
#
#   bash benchmarks/papers/dpot/runs.sh GROUP ...
#
# Groups: ablation ablation_dr_swe heads_patch_dr_swe pretrain transfer stretch (the last two need pretrain).
set -u
RUNS=${RUNS:-runs/dpot}
PY=${PY:-.venv/bin/python}
THREADS=${THREADS:-1}
mkdir -p "$RUNS"
load() { cut -d' ' -f1-3 /proc/loadavg; }

# finished DIR: the run in DIR has trained all the epochs its config asks for
finished() {
  [ -f "$1/summary.json" ] && "$PY" - "$1" <<'PY'
import json, sys, yaml
from pathlib import Path
run = Path(sys.argv[1])
done = json.loads((run / "summary.json").read_text())["epochs"]
sys.exit(0 if done >= yaml.safe_load((run / "config.yaml").read_text())["train"]["epochs"] else 1)
PY
}

# run NAME CONFIG [--set KEY=VALUE ...]
run() {
  local name=$1 config=$2; shift 2
  local dir="$RUNS/$name"
  if finished "$dir"; then echo "skip $dir (finished)"; return 0; fi
  local start load_start
  start=$(date +%s); load_start=$(load)
  if [ -f "$dir/config.yaml" ]; then
    "$PY" -m opformer train --resume "$dir" || return $?
  else
    "$PY" -m opformer train "$config" --out "$dir" --set "train.num_threads=$THREADS" "$@" || return $?
  fi
  echo "$name seconds $(( $(date +%s) - start )) load_start $load_start load_end $(load) threads $THREADS" \
    >> "$RUNS/runs.log"
}

ablation() {  # §4.3 noise (Table 4 analog) and §4.4 architecture (Table 7 analog), DPOT nano on {DR, SWE, CNS}
  local noise
  for noise in 0.2 0 0.02 2.0 20.0; do
    run "noise_$noise" configs/mixture/ablation_dpot_nano.yaml --set "rollout.noise=$noise" || return $?
  done
  run afno_nano configs/mixture/ablation_dpot_nano.yaml --set model.shrink=0.01 || return $?
  run fno2d_time_nano configs/mixture/ablation_fno2d_time.yaml || return $?
}

heads_patch_dr_swe() {  # Table 3's heads and patch size on {DR, SWE}: DPOT nano's 4 heads, patch 4 is noise_dr_swe_0.2
  local n
  for n in 1 8 16; do
    run "heads_dr_swe_$n" configs/mixture/ablation_dpot_nano_dr_swe.yaml --set "model.n_heads=$n" || return $?
  done
  for n in 8 16 2; do
    run "patch_dr_swe_$n" configs/mixture/ablation_dpot_nano_dr_swe.yaml --set "model.patch_size=$n" || return $?
  done
}

ablation_dr_swe() {  # §4.3's five noise levels on {DR, SWE} alone (no CNS member: ~14 CPU-hours to generate)
  local noise
  for noise in 20.0 0.2 0 2.0 0.02; do
    run "noise_dr_swe_$noise" configs/mixture/ablation_dpot_nano_dr_swe.yaml --set "rollout.noise=$noise" || return $?
  done
}

pretrain() {  # §4.1: DPOT micro and FNO2d-time on the 8-member mixture, the same steps
  run pretrain_micro configs/mixture/dpot_micro.yaml || return $?
  run pretrain_fno2d_time configs/mixture/fno2d_time.yaml || return $?
}

transfer() {  # §4.2: held-out Kolmogorov flow, fine-tuned from pretrain_micro vs from scratch, ~600 steps each
  # NS (default "10 100"), SEEDS (default "0 1 2") and INITS (default "finetune scratch") choose a part: the scratch runs need no
  # pre-training, so INITS=scratch can run beside it; a fine-tuning run waits for a finished pretrain_micro.
  # KOLMOGOROV_DATA (default data/kolmogorov_dpot.h5): the 10-trajectory runs need only the first 50 samples,
  # so a file of the first 64 (the same seed stream, hence the same samples) lets them start before the 140 are made.
  local n seed init start
  local -A epochs=([10]=75 [100]=8)  # benchmarks/papers/dpot/tables.py's KOLMOGOROV_EPOCHS
  for n in ${NS:-10 100}; do
    for seed in ${SEEDS:-0 1 2}; do
      for init in ${INITS:-finetune scratch}; do
        start=null
        if [ "$init" = finetune ]; then
          start="$RUNS/pretrain_micro"
          finished "$start" || { echo "$start has not finished: run the pretrain group first" >&2; return 1; }
        fi
        run "kolmogorov_${init}_n${n}_s${seed}" configs/kolmogorov/dpot_micro_finetune.yaml --set "data.n_train=$n" \
          --set "train.epochs=${epochs[$n]}" --set "seed=$seed" --set "init.checkpoint=$start" \
          --set "data.path=${KOLMOGOROV_DATA:-data/kolmogorov_dpot.h5}" || return $?
      done
    done
  done
}

stretch() {  # §4.5: the pre-trained blocks in steady Darcy at 85^2 and 3D turbulence at 32^3, vs scratch, 3 seeds
  # The data (the commands are in the configs): data/darcy_dpot_85.h5 and data/turbulence3d_dpot.h5.
  # SEEDS (default "0 1 2"), PROBLEMS (default "darcy turbulence3d") and INITS (default "blocks scratch") choose a part.
  local seed problem init start
  for seed in ${SEEDS:-0 1 2}; do
    for problem in ${PROBLEMS:-darcy turbulence3d}; do
      for init in ${INITS:-blocks scratch}; do
        start="init={}"  # scratch: no init section (the config's names the blocks)
        if [ "$init" = blocks ]; then
          finished "$RUNS/pretrain_micro" || { echo "$RUNS/pretrain_micro has not finished: run the pretrain group first" >&2; return 1; }
          start="init.checkpoint=$RUNS/pretrain_micro"
        fi
        run "${problem}_${init}_s${seed}" "configs/transfer/${problem}_dpot_micro.yaml" --set "seed=$seed" \
          --set "$start" || return $?
      done
    done
  done
}

groups="ablation, ablation_dr_swe, heads_patch_dr_swe, pretrain, transfer, stretch"
usage="usage: bash benchmarks/papers/dpot/runs.sh GROUP ... ($groups)"
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
for group in "$@"; do
  case $group in
    ablation|ablation_dr_swe|heads_patch_dr_swe|pretrain|transfer|stretch) $group || exit $? ;;
    *) echo "unknown group $group ($groups)" >&2; exit 2 ;;
  esac
done
