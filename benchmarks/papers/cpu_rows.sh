#!/usr/bin/env bash
# The papers' rows still open on this project's 2-core CPU: the seed runs that the ledgers' three-seed rule asks for
# where two models lie within two seeds' spread (docs/papers/galerkin-transformer.md, Table 2a; docs/papers/
# factformer.md, Table 3). Three streams, one core each:
#   A  3D smoke at 32^3 (Li et al. 2023, Table 3) on the authors' per-channel loss: Dil-ResNet LM, then FactFormer
#      LM, seeds 1 and 2 (about 10 and 25 min a run on one core)
#   B  Burgers at n = 512 (Cao 2021, Table 2a) on the paper's recipe: FT seeds 1 and 2, ST seeds 1 and 2, GT seed 4
#   C  the same: LT seeds 1 and 2, GT seed 3 (about 1 h a Burgers run)
# Each stream generates its data if missing, then calls the benchmark scripts, one model at a time: they resume a
# started run from its last checkpoint, skip a finished one and tabulate the model's seeds into their results folder
# (beside the rows there), so a stream stopped halfway keeps every model it finished.
# Usage on 2 cores, from the root of a frozen copy of the tree, so that edits never change a run halfway:
#   git clone -q . /tmp/frozen && cd /tmp/frozen
#   export DATA=/root/data RUNS=/root/runs
#   nohup bash -c 'bash benchmarks/papers/cpu_rows.sh A; bash benchmarks/papers/cpu_rows.sh C' > AC.log 2>&1 &
#   nohup bash benchmarks/papers/cpu_rows.sh B > B.log 2>&1 &
# then copy the copy's benchmarks/results/papers/galerkin/burgers.* and factformer/smoke3d_velocity/ into the tree.
set -eu
case ${1:-} in A|B|C) ;; *) echo "cpu_rows.sh: expected the stream A, B or C, got '${1:-}'" >&2; exit 2 ;; esac
DATA=${DATA:-data}
RUNS=${RUNS:-runs}
PY=${PY:-python3}
export PYTHONPATH=$PWD/src:$PWD MPLBACKEND=Agg
mkdir -p "$DATA" "$RUNS"
echo "stream $1 from $(git rev-parse --short HEAD 2>/dev/null || pwd), load $(cut -d' ' -f1-3 /proc/loadavg)"

case $1 in
A)
  [ -f "$DATA/smoke3d_32.h5" ] || "$PY" -m opformer generate smoke3d --samples 48 --resolution 32 \
    --out "$DATA/smoke3d_32.h5"
  for config in smoke3d_dil_resnet_lm smoke3d_factformer_lm; do
    "$PY" -m benchmarks.papers.factformer.smoke3d --data "$DATA/smoke3d_32.h5" --runs "$RUNS/smoke32" \
      --jobs 1 --threads 1 --eval-threads 1 --epochs 60 --configs "$config" --seeds 1,2 --only-seeds \
      --set 'loss.channel_weights=[1.0,0.3333333333333333,0.3333333333333333,0.3333333333333333]' \
      --set rollout.march_curriculum_epochs=4 --set rollout.pushforward_epoch=6 \
      --results benchmarks/results/papers/factformer/smoke3d_velocity
  done ;;
B|C)
  [ -f "$DATA/burgers.h5" ] || "$PY" -m opformer generate burgers --samples 1224 --resolution 8192 \
    --out "$DATA/burgers.h5"
  if [ "$1" = B ]; then rows="ft:1,2 st:1,2 gt:4"; else rows="lt:1,2 gt:3"; fi
  for model_seeds in $rows; do
    "$PY" -m benchmarks.papers.galerkin.burgers --data "$DATA/burgers.h5" --runs "$RUNS/burgers" --jobs 1 \
      --threads 1 --models "${model_seeds%:*}" --seeds "${model_seeds#*:}" --only-seeds
  done ;;
esac
echo "stream $1 done, load $(cut -d' ' -f1-3 /proc/loadavg)"
