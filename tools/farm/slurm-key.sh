#!/bin/bash
# One task of a Slurm job array keying a clip in chunks of frame numbers: the
# sbatch recipe behind `ckey farm slurm` (which writes the same task inline).
#
#   jid=$(sbatch --parsable --array=0-$((TASKS - 1)) --gres=gpu:1 --requeue \
#         tools/farm/slurm-key.sh SHOT_DIR FIRST LAST CHUNK [ckey key options ...])
#   sbatch --dependency=afterok:${jid%%;*} --wrap "ckey encode SHOT_DIR --video-out both"
#
# Task t keys frame numbers FIRST + t*CHUNK .. FIRST + t*CHUNK + CHUNK - 1
# (LAST at most), so TASKS = (LAST - FIRST) / CHUNK + 1; a chunk over a gap
# in the numbering succeeds with nothing to do (--empty-ok), and a task run
# again resumes its chunk. $CKEY names the ckey program (default: ckey on
# PATH). With --gres=gpu:1 Slurm shows the task its GPU as CUDA device 0,
# which ckey's default --device picks. docs/farm.md has the details.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: sbatch --array=0-N [--gres=gpu:1] $0 SHOT_DIR FIRST LAST CHUNK [ckey key options ...]" >&2
  exit 2
fi
shot=$1 first=$2 last=$3 chunk=$4
shift 4
: "${SLURM_ARRAY_TASK_ID:?not a job array task: submit with sbatch --array=0-N}"
a=$(( first + chunk * SLURM_ARRAY_TASK_ID ))
b=$(( a + chunk - 1 ))
if [ "$b" -gt "$last" ]; then b=$last; fi
exec "${CKEY:-ckey}" key "$shot" --frames "$a-$b" --empty-ok "$@"
