#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, to run the DAG through profiles/slurm for real (tests/test_slurm.py).
#   scripts/slurm_cluster.sh install         apt-get install slurm-wlm munge when missing (root; exit 3 if it cannot)
#   scripts/slurm_cluster.sh start           private munged + slurmctld + slurmd (node 'rooflab1', partition 'debug')
#   scripts/slurm_cluster.sh run ARGS...     start, run `snakemake --profile profiles/slurm ARGS...`, stop
#   scripts/slurm_cluster.sh stop            stop the three daemons, each by its pid file
#
# Everything lives under $ROOFLAB_SLURM_DIR (default /tmp/rooflab-slurm), except slurm.conf and gres.conf: the
# plugin's job step drops SLURM_CONF, so they must be at /etc/slurm/. Both are marked as ours and are never written
# over a site's own files. No slurmdbd: pass `--slurm-status-command squeue` (the plugin would ask sacct, which
# knows nothing without a database); MinJobAge keeps finished jobs visible to squeue long enough for it.
# The node declares one GRES gpu whose device file is an empty file, so gres requests are scheduled for real.
# Environment: ROOFLAB_SLURM_TIMEOUT (seconds for `run`, default 300; the run is killed after it).
set -euo pipefail

STATE=${ROOFLAB_SLURM_DIR:-/tmp/rooflab-slurm}
CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
MARK="# rooflab test cluster (scripts/slurm_cluster.sh)"
NODE=rooflab1
CTLD_PORT=${ROOFLAB_SLURM_PORT:-16817}

log() { printf '[slurm_cluster] %s\n' "$*" >&2; }

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
      && command -v sbatch >/dev/null; then
    return 0
  fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "slurm is not installed and cannot be (needs root and apt-get)"
    exit 3
  fi
  log "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q slurm-wlm munge >"$STATE/apt.log" 2>&1; then
    timeout 300 apt-get update -q >>"$STATE/apt.log" 2>&1 || true
    apt-get install -y -q slurm-wlm munge >>"$STATE/apt.log" 2>&1 \
      || { log "apt-get install slurm-wlm munge failed: see $STATE/apt.log"; exit 3; }
  fi
}

ours_or_absent() {  # never overwrite a site's own configuration
  [ ! -e "$1" ] || head -1 "$1" | grep -qF "$MARK" || { log "$1 exists and is not ours: refusing to touch it"; exit 4; }
}

write_config() {
  ours_or_absent "$CONF"
  ours_or_absent "$GRES_CONF"
  mkdir -p /etc/slurm "$STATE"/{ctld,slurmd,log,munge}
  : >"$STATE/gpu0"  # the GRES device file: slurm only needs it to exist
  local cpus mem host
  cpus=$(nproc)
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -1)
  mem=$(( ${mem:-4096} * 3 / 4 ))
  host=$(hostname -s)
  cat >"$CONF" <<EOF
$MARK
ClusterName=rooflab
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=60
GresTypes=gpu
NodeName=$NODE NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$GRES_CONF" <<EOF
$MARK
NodeName=$NODE Name=gpu File=$STATE/gpu0
EOF
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  mkdir -p "$STATE"
  install
  if running "$STATE/slurmctld.pid" && running "$STATE/slurmd.pid"; then
    log "already running"
    return 0
  fi
  write_config
  if ! running "$STATE/munge/munged.pid"; then
    [ -f "$STATE/munge/munge.key" ] || { dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none;
                                         chmod 600 "$STATE/munge/munge.key"; }
    chmod 700 "$STATE/munge"
    munged --force --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
      --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/seed"
  fi
  running "$STATE/slurmctld.pid" || slurmctld -i
  running "$STATE/slurmd.pid" || slurmd -N "$NODE"
  local i
  for i in $(seq 60); do
    if sinfo -h -n "$NODE" -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      log "up: node $NODE ($(nproc) cpus, gres gpu:1), partition debug; state in $STATE"
      return 0
    fi
    sleep 0.5
  done
  log "the node did not come up; logs in $STATE/log"
  sinfo -N -l >&2 || true
  tail -20 "$STATE"/log/*.log >&2 || true
  return 1
}

stop() {
  local name pidfile
  for name in slurmd slurmctld munge/munged; do
    pidfile=$STATE/$name.pid
    if running "$pidfile"; then
      kill "$(cat "$pidfile")" 2>/dev/null || true
      for _ in $(seq 40); do running "$pidfile" || break; sleep 0.25; done
      running "$pidfile" && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
  for f in "$CONF" "$GRES_CONF"; do
    [ -e "$f" ] && head -1 "$f" | grep -qF "$MARK" && rm -f "$f"
  done
  log "stopped"
}

run() {
  trap stop EXIT
  start
  local rc=0
  timeout -s KILL "${ROOFLAB_SLURM_TIMEOUT:-300}" snakemake --profile profiles/slurm "$@" || rc=$?
  [ "$rc" = 137 ] && log "snakemake was killed after ${ROOFLAB_SLURM_TIMEOUT:-300} s"
  # scancel what the run may have left, so the node is free for the next one
  scancel --partition=debug 2>/dev/null || true
  return "$rc"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  install) mkdir -p "$STATE"; install ;;
  start) start ;;
  stop) stop ;;
  run) run "$@" ;;
  *) echo "usage: $0 install|start|stop|run [snakemake args...]" >&2; exit 2 ;;
esac
