#!/usr/bin/env bash
# A throw-away single-node Slurm cluster on this machine, for tests and
# benchmarks (tests/test-slurm.c, bench/farm-chunks.sh); not for production.
#
#   tools/farm/local-slurm.sh start DIR [GPUS [CPUS]]
#   tools/farm/local-slurm.sh stop DIR
#
# start: a munged with a key made here, a slurmctld and a slurmd (node
# "localhost" with CPUS CPUs, default all, and GPUS fake GPUs, default 2:
# gres.conf File= entries are links to /dev/null, so Slurm hands out
# --gres=gpu:1 and sets CUDA_VISIBLE_DEVICES, but there is no GPU behind
# them), every file under DIR (created), on TCP ports found free; munge's
# socket is DIR/munge/socket (AuthInfo), so a system munged is neither used
# nor disturbed. Prints the line to source, `export SLURM_CONF=DIR/slurm.conf`,
# and also writes it to DIR/env. Accounting is off; jobs run as the caller.
# Needs root (slurmd starts jobs as their users) and Debian's slurmctld,
# slurmd, slurm-client and munge: exits 77 with the reason when they are
# missing.
#
# stop: cancels every job, stops the daemons and ends the processes of the
# jobs still running (slurmstepd and job processes whose environment names
# DIR/slurm.conf), each by its pid. DIR itself is left to the caller.
set -euo pipefail

usage() { echo "usage: $0 start DIR [GPUS [CPUS]] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
PATH=$PATH:/usr/sbin:/sbin

# The pids of this cluster's jobs and job steps: slurmstepd processes and
# processes with a SLURM_JOB_ID, whose environment holds SLURM_CONF=$conf (no
# other cluster's do). A shell that merely sourced DIR/env has no job id.
cluster_pids() {
  local conf=$1 f p
  for f in $(grep -lzxF "SLURM_CONF=$conf" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f%/environ}
    if grep -qz '^SLURM_JOB_ID=' "$f" 2>/dev/null || [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ]; then
      echo "${p#/proc/}"
    fi
  done
}

# Running, not gone or a zombie (the daemons' parent may be slow to reap them).
alive() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  [ "${st%% *}" != Z ]
}

# SIGTERM, then SIGKILL after 1 s (slurmctld takes longer to save a state
# that is thrown away anyway).
kill_pidfile() {
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 10); do alive "$pid" || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

if [ "$cmd" = stop ]; then
  [ -d "$dir" ] || exit 0
  dir=$(cd "$dir" && pwd)
  conf=$dir/slurm.conf
  if [ -f "$conf" ]; then
    SLURM_CONF=$conf timeout 10 scancel --user="$(id -un)" >/dev/null 2>&1 || true
  fi
  kill_pidfile "$dir/slurmd.pid"
  kill_pidfile "$dir/slurmctld.pid"
  # job steps whose slurmd is gone: end them by pid
  for pid in $(cluster_pids "$conf"); do
    [ "$pid" = $$ ] || kill -9 "$pid" 2>/dev/null || true
  done
  kill_pidfile "$dir/munge/pid"
  exit 0
fi
[ "$cmd" = start ] || usage
gpus=${3:-2}
cpus=${4:-$(nproc)}

missing=()
for tool in slurmctld slurmd munged sbatch squeue scontrol scancel sinfo; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "local-slurm: not installed: ${missing[*]} (Debian: apt-get install slurmctld slurmd slurm-client munge)" >&2
  exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "local-slurm: needs root (slurmd starts jobs as their users)" >&2
  exit 77
fi

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/dev"
chmod 700 "$dir/munge"
chmod 755 "$dir"

# two free TCP ports: not listening now (/proc/net/tcp*, state 0A)
listening=$(for f in /proc/net/tcp /proc/net/tcp6; do [ -r "$f" ] && tail -n +2 "$f"; done |
  while read -r _ local _ st _; do [ "$st" = 0A ] && echo $((16#${local##*:})); done | sort -u || true)
ports=()
base=$(( 20000 + ($$ * 7 + RANDOM) % 20000 ))
for p in $(seq "$base" $((base + 500))); do
  grep -qx "$p" <<< "$listening" && continue
  ports+=("$p")
  [ ${#ports[@]} -eq 2 ] && break
done

# munge: a key made here, its own socket
dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/key"
munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/key" \
  --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" --seed-file="$dir/munge/seed"

for k in $(seq 0 $((gpus - 1))); do ln -sf /dev/null "$dir/dev/gpu$k"; done
gres_node=""
if [ "$gpus" -gt 0 ]; then
  gres_node=" Gres=gpu:$gpus"
  echo "NodeName=localhost Name=gpu File=$dir/dev/gpu[0-$((gpus - 1))]" > "$dir/gres.conf"
else
  : > "$dir/gres.conf"
fi
cat > "$dir/slurm.conf" <<CONF
ClusterName=ckeylocal
SlurmctldHost=localhost
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
MpiDefault=none
ReturnToService=2
KillWait=2
MinJobAge=600
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus$gres_node State=UNKNOWN
PartitionName=local Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
echo "export SLURM_CONF=$SLURM_CONF" > "$dir/env"

slurmctld -c
slurmd -N localhost
for _ in $(seq 100); do
  state=$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)
  if [ "$state" = idle ]; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "local-slurm: the node did not come up (state '${state:-none}'); logs:" >&2
tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" "$dir/munge/log" >&2 || true
"$0" stop "$dir" || true
exit 1
