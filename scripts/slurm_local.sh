#!/usr/bin/env bash
# A real single-node Slurm on this machine, for the tests marked `slurm` (pytest -m slurm) and for trying
# `hydra/launcher=submitit_slurm` by hand: Debian's slurm-wlm and munge, run as root without systemd.
#
#   scripts/slurm_local.sh start    # install slurm-wlm and munge when missing, start munged, slurmctld, slurmd
#   scripts/slurm_local.sh stop     # stop the three daemons this script started (by their pid files)
#   scripts/slurm_local.sh status   # sinfo
#
# The node is this machine (`hostname -s`, at 127.0.0.1) with all its CPUs and 90 % of its memory, in the
# partition `debug`. Jobs are tracked by /proc (proctrack/linuxproc: no cgroups needed) and not confined
# (task/none); there is no accounting database, so submitit falls back from sacct to squeue. KillWait is
# Slurm's default, 30 s: a job that is cancelled or reaches its time limit gets SIGTERM, then SIGKILL 30 s later.
set -euo pipefail

PARTITION=debug
STATE=/var/lib/igel-slurm   # pid files, logs and Slurm's state
CONF=/etc/slurm/slurm.conf

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "slurm_local.sh: must run as root (it installs packages and starts daemons)" >&2
    exit 1
  fi
}

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
    && command -v sbatch >/dev/null; then
    return
  fi
  echo "slurm_local.sh: installing slurm-wlm and munge (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

running() {  # running NAME: whether the process in $STATE/NAME.pid is alive
  [ -s "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null
}

start_munge() {
  mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
  chmod 0700 /etc/munge /var/lib/munge /var/log/munge
  chmod 0755 /run/munge
  chmod 0400 /etc/munge/munge.key
  if ! running munged; then
    runuser -u munge -- munged --pid-file=/run/munge/munged.pid
    cp /run/munge/munged.pid "$STATE/munged.pid"
  fi
  munge -n | unmunge >/dev/null
}

write_conf() {
  local host cpus memory
  host=$(hostname -s)
  cpus=$(nproc)
  memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)  # MiB
  mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d"
  cat >"$CONF" <<EOF
# written by igel-exp's scripts/slurm_local.sh: a single-node cluster on this machine
ClusterName=igel
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
ReturnToService=2
KillWait=30
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_idle() {
  local state
  for _ in $(seq 60); do
    state=$(sinfo -h -p "$PARTITION" -o %T 2>/dev/null || true)
    case "$state" in
      idle* | mixed* | allocated*) return 0 ;;
      down* | drain*) scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  echo "slurm_local.sh: the node did not come up (state: ${state:-none}); see $STATE/slurmctld.log and slurmd.log" >&2
  return 1
}

start() {
  need_root
  install
  mkdir -p "$STATE"
  start_munge
  write_conf
  running slurmctld || slurmctld -c  # -c: a clean state, no jobs left from an earlier start
  running slurmd || slurmd
  wait_idle
  echo "slurm_local.sh: Slurm is up: partition $PARTITION on $(hostname -s), $(nproc) CPUs" >&2
}

stop() {
  need_root
  local name
  for name in slurmd slurmctld munged; do
    if running "$name"; then
      kill "$(cat "$STATE/$name.pid")"
    fi
    rm -f "$STATE/$name.pid"
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) sinfo ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
