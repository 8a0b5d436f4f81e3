# A real, private Slurm cluster on localhost for tests: slurmctld + slurmd, one node "localhost"
# with NGPUS fake GPUs (character devices made with mknod, as gres.conf requires), everything in a
# scratch directory, on ports nobody else is listening on. Source this file, then:
#
#   slurm_cluster_start [NGPUS] [CPUS]   start and wait until the node is idle (exports SLURM_CONF)
#   slurm_submit FILE [sbatch args...]   sbatch --parsable; prints the job id
#   slurm_wait JOBID [TIMEOUT_S]         poll squeue every 0.2 s; scancel and fail past the timeout;
#                                        then check the job COMPLETED with exit code 0:0
#   slurm_job_field JOBID FIELD          a field of `scontrol show job` (JobState, ExitCode, ...)
#   slurm_dump_logs                      tail the daemons' logs (on failure)
#   slurm_cluster_stop                   stop everything (also runs on any exit, see tests/lib/guard.sh)
#
# The daemons are stopped by the PIDs in their pid files, job steps left over by the PIDs of the
# processes that carry this cluster's SLURM_CONF in their environment; the scratch directory is
# removed unless GR_KEEP_SLURM_DIR=1.

_gr_slurm_lib_dir=$(cd "$(dirname "${BASH_SOURCE:-$0}")" 2>/dev/null && pwd)
. "$_gr_slurm_lib_dir/../../lib/guard.sh"

_slurm_free_port() {
  while :; do
    _p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000 ))
    ss -Hltn "sport = :$_p" 2>/dev/null | grep -q . || { echo "$_p"; return; }
  done
}

slurm_cluster_start() {
  _ngpus=${1:-4}
  _cpus=${2:-8}
  # root: slurmd runs jobs as their users and the fake GPUs are device nodes (mknod).
  if [ "$(id -u)" != 0 ]; then echo "SKIP: the private Slurm cluster needs root"; exit 77; fi
  for _t in slurmctld slurmd sbatch squeue scontrol sinfo; do
    command -v "$_t" >/dev/null 2>&1 || { echo "SKIP: $_t not installed"; exit 77; }
  done
  SLURM_DIR=$(mktemp -d /tmp/gr-slurm.XXXXXX)
  D=$SLURM_DIR
  mkdir -p "$D/state" "$D/spool" "$D/log" "$D/dev"
  _ctld_port=$(_slurm_free_port)
  _d_port=$(_slurm_free_port)
  while [ "$_d_port" = "$_ctld_port" ]; do _d_port=$(_slurm_free_port); done
  _gpu_last=$((_ngpus - 1))
  for _i in $(seq 0 "$_gpu_last"); do mknod "$D/dev/nvidia$_i" c 195 "$_i"; done
  # The CPUs declared may exceed the real ones (config_overrides): the tests place 4 tasks on a
  # 2-core machine, as --oversubscribe does for mpirun.
  cat >"$D/slurm.conf" <<CONF
ClusterName=grtest
SlurmctldHost=localhost
SlurmctldPort=$_ctld_port
SlurmdPort=$_d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$_cpus RealMemory=2000 Gres=gpu:$_ngpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=localhost Name=gpu File=$D/dev/nvidia[0-$_gpu_last]" >"$D/gres.conf"
  export SLURM_CONF="$D/slurm.conf"

  cat >"$D.cleanup" <<CLEAN
. '$_gr_slurm_lib_dir/../../lib/guard.sh'
export SLURM_CONF='$SLURM_CONF'
# Daemons, by the PIDs they wrote: TERM to both (slurmd first), then wait for both together.
_pids=
for _f in '$D/slurmd.pid' '$D/slurmctld.pid'; do
  [ -f "\$_f" ] || continue
  _pid=\$(cat "\$_f")
  [ -n "\$_pid" ] || continue
  # Only our daemon: the PID must still belong to a process started with -f this slurm.conf.
  grep -qszxF -- '$D/slurm.conf' /proc/\$_pid/cmdline 2>/dev/null || continue
  kill -TERM "\$_pid" 2>/dev/null && _pids="\$_pids \$_pid"
done
_i=0
while [ -n "\$_pids" ] && [ \$_i -lt 100 ]; do
  _alive=
  for _pid in \$_pids; do kill -0 "\$_pid" 2>/dev/null && _alive="\$_alive \$_pid"; done
  _pids=\$_alive
  [ -n "\$_pids" ] && sleep 0.1
  _i=\$((_i + 1))
done
[ -n "\$_pids" ] && kill -KILL \$_pids 2>/dev/null
# Job steps and job processes (they inherit SLURM_CONF from the submitting shell).
gr_kill_by_env_marker SLURM_CONF '$D/slurm.conf'
[ "\${GR_KEEP_SLURM_DIR:-0}" = 1 ] || rm -rf '$D'
CLEAN
  # The cleanup file sits beside D, not in it, so removing D does not remove it under the reaper.
  gr_guard_start "$D.cleanup"

  slurmctld -f "$SLURM_CONF" || { slurm_dump_logs; return 1; }
  slurmd -f "$SLURM_CONF" -N localhost || { slurm_dump_logs; return 1; }
  _i=0
  while :; do
    _st=$(sinfo -h -N -o %T 2>/dev/null | head -n1)
    [ "$_st" = idle ] && break
    _i=$((_i + 1))
    if [ $_i -gt 150 ]; then
      echo "slurm: node did not become idle within 30 s (state '$_st')" >&2
      slurm_dump_logs; return 1
    fi
    sleep 0.2
  done
  echo "slurm: cluster up in $D (ports $_ctld_port/$_d_port, $_ngpus GPUs, $_cpus CPUs)"
}

slurm_dump_logs() {
  for _f in "$SLURM_DIR"/log/*.log; do
    [ -f "$_f" ] || continue
    echo "---- $_f (last 30 lines)" >&2
    tail -n 30 "$_f" >&2
  done
}

slurm_submit() {
  _file=$1; shift
  sbatch --parsable "$@" "$_file" | cut -d';' -f1
}

slurm_job_field() {
  scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n1
}

slurm_wait() {
  _job=$1; _limit=${2:-120}
  _n=0; _max=$((_limit * 5))
  while [ -n "$(squeue -h -j "$_job" 2>/dev/null)" ]; do
    _n=$((_n + 1))
    if [ $_n -gt $_max ]; then
      echo "slurm: job $_job still in the queue after ${_limit} s; cancelling" >&2
      scancel "$_job" 2>/dev/null || true
      return 1
    fi
    sleep 0.2
  done
  _state=$(slurm_job_field "$_job" JobState)
  _exit=$(slurm_job_field "$_job" ExitCode)
  echo "slurm: job $_job $_state exit $_exit"
  [ "$_state" = COMPLETED ] && [ "$_exit" = 0:0 ]
}

slurm_cluster_stop() {
  gr_guard_run
}
