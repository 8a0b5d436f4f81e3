#!/bin/sh
# gpurun --monitor --prometheus end to end: a 2-rank job on a recorded 4-GPU node with the fake
# NVML (GR_FAKE_NVML=node4, known readings), Debian's prometheus-node-exporter started for real on
# localhost with its textfile collector on the --prometheus directory, /metrics scraped with curl.
# Every file says who wrote it (the owner line) and serves gpurun_up and the sample time.
# The job id holds a quote and a backslash: the job directory and the job label use its safe form
# (gr_safefile.h: ev_il_job); label escaping itself is test_prom's.
# Every metric the Grafana dashboard (configs/grafana) queries must be served.
# gpurun-report then shows the shared GPU's split from the CSVs.
# usage: test_prometheus.sh MPIRUN GPURUN LIVE_LOOP FAKE_NVML TOPOLOGY DASHBOARD GPURUN_REPORT
set -u
mpirun=$1 gpurun=$2 prog=$3 fake=$4 topo=$5 dashboard=$6 report=$7
exporter=$(command -v prometheus-node-exporter) || { echo "prometheus-node-exporter not installed"; exit 77; }
tmp=$(mktemp -d /tmp/gr_prom.XXXXXX)
exp_pid= job_pid=
cleanup() {
  touch "$tmp/stop"
  [ -n "$job_pid" ] && { sleep 2; kill "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null; }
  [ -n "$exp_pid" ] && { kill "$exp_pid" 2>/dev/null; wait "$exp_pid" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir "$tmp/prom"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$exporter" --web.listen-address=127.0.0.1:$port --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$tmp/prom" > "$tmp/exporter.log" 2>&1 &
exp_pid=$!
scrape() { curl -sf "http://127.0.0.1:$port/metrics" > "$tmp/metrics"; }
i=0
until scrape; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "node exporter did not come up: $(cat "$tmp/exporter.log")"
  sleep 0.1
done

job='ev"il\job'
GPURUN_NVML_LIBRARY="$fake" GR_FAKE_NVML=node4 GPURUN_MONITOR_DIR="$tmp/mon" GPURUN_JOB_ID="$job" \
  timeout -k 5 100 "$mpirun" -np 2 --oversubscribe -x GPURUN_NVML_LIBRARY -x GR_FAKE_NVML \
  "$gpurun" --topology "$topo" --monitor=0.2 --prometheus "$tmp/prom" "$prog" "$tmp/stop" > "$tmp/job.out" 2>&1 &
job_pid=$!
# Both ranks' files, each past its first finished call (the live file feeds the collective series).
value() { grep -F "$1{" "$tmp/metrics" | grep -F "$2" | awk '{ print $NF }'; }
positive() { awk -v v="$1" 'BEGIN { exit !(v > 0) }'; }
l0='host="'$(hostname)'",job="ev_il_job",local_rank="0"'
l1='host="'$(hostname)'",job="ev_il_job",local_rank="1"'
i=0
until scrape && positive "$(value gpurun_rank_collective_seconds_total "$l0,rank=\"0\"}")" &&
      positive "$(value gpurun_rank_collective_seconds_total "$l1,rank=\"1\"}")"; do
  i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/job.out"; ls -la "$tmp/prom"; fail "no collective seconds of both ranks after 30 s"; }
  sleep 0.1
done
ls "$tmp/prom"
grep '^gpurun_\|^node_textfile' "$tmp/metrics" | head -50
grep -q '^node_textfile_scrape_error 0' "$tmp/metrics" || fail "node exporter could not parse the files"
# The recorded node's plan: rank 0 gets GPUs 0 and 1, rank 1 GPUs 2 and 3 (gpurun --dry-run).
want() { grep -qF "$1" "$tmp/metrics" || fail "missing: $1"; }
want "gpurun_gpu_utilization_ratio{gpu=\"0\",$l0,pci=\"0004:04:00.0\",rank=\"0\"} 0.9"
want "gpurun_gpu_memory_used_bytes{gpu=\"0\",$l0,pci=\"0004:04:00.0\",rank=\"0\"} 1.610612736e+09"
want "gpurun_gpu_ecc_uncorrected_volatile_errors{gpu=\"1\",$l0,pci=\"0004:05:00.0\",rank=\"0\"} 3"
want "gpurun_gpu_throttle_reasons{gpu=\"2\",$l1,pci=\"0035:03:00.0\",rank=\"1\"} 96"
want "gpurun_gpu_temperature_celsius{gpu=\"2\",$l1,pci=\"0035:03:00.0\",rank=\"1\"} 92"
want "gpurun_gpu_energy_joules_total{gpu=\"3\",$l1,pci=\"0035:04:00.0\",rank=\"1\"} 123456.792"
# GPU 0 is shared: the rank's program (gpurun's pid, beside its supervisor) 60%, a co-tenant (pid 1) 25%.
want "gpurun_gpu_rank_utilization_ratio{gpu=\"0\",$l0,pci=\"0004:04:00.0\",rank=\"0\"} 0.6"
want "gpurun_gpu_others_utilization_ratio{gpu=\"0\",$l0,pci=\"0004:04:00.0\",rank=\"0\"} 0.25"
want "gpurun_gpu_rank_memory_used_bytes{gpu=\"0\",$l0,pci=\"0004:04:00.0\",rank=\"0\"} 1.073741824e+09"
want "gpurun_gpu_others_memory_used_bytes{gpu=\"0\",$l0,pci=\"0004:04:00.0\",rank=\"0\"} 5.36870912e+08"
want "gpurun_gpu_power_watts{gpu=\"0\",$l0,pci=\"0004:04:00.0\",rank=\"0\"} 250"
rss=$(value gpurun_rank_resident_memory_bytes "$l0,rank=\"0\"}")
awk -v v="$rss" 'BEGIN { exit !(v > 1e6) }' || fail "RSS of rank 0 is '$rss'"
cs=$(value gpurun_rank_collective_seconds_total "$l1,rank=\"1\"}")
awk -v v="$cs" 'BEGIN { exit !(v > 0) }' || fail "collective seconds of rank 1 are '$cs'"
grep -q '^# TYPE gpurun_gpu_energy_joules_total counter' "$tmp/metrics" || fail "energy is not a counter"
want "gpurun_up{$l0,rank=\"0\"} 1"
want "gpurun_up{$l1,rank=\"1\"} 1"
st=$(value gpurun_sample_time_seconds "$l1,rank=\"1\"}")
awk -v t="$st" -v now="$(date +%s.%N)" 'BEGIN { exit !(t > now - 30 && t <= now + 1) }' ||
  fail "the sample time of rank 1 is '$st', not now"
# Each file starts with its writer's owner line (gr_prom.h), a comment to the exporter.
for f in "$tmp"/prom/gpurun_*.prom; do
  head -n 1 "$f" | grep -Eq "^# gpurun-owner 1 host=$(hostname) boot=[0-9a-f-]+ pidns=[0-9]+ pid=[0-9]+ start=[0-9]+\$" ||
    fail "$f does not start with an owner line: $(head -n 1 "$f")"
done

cp "$tmp/metrics" "$tmp/metrics.job"

# This machine's own cores (the recorded node's do not exist here): the CPU series.
GPURUN_PROMETHEUS="$tmp/prom" GPURUN_MONITOR_DIR="$tmp/mon2" "$gpurun" --monitor=0.1 sleep 3 &
cpu_pid=$!
i=0
until scrape && grep -q '^gpurun_rank_cpu_utilization_ratio{' "$tmp/metrics"; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "no CPU series from a job on this machine's cores"
  sleep 0.1
done
wait "$cpu_pid"
for m in $(grep -o 'gpurun_[a-z_]*' "$dashboard" | sort -u); do
  grep -q "^$m{" "$tmp/metrics.job" "$tmp/metrics" || fail "the dashboard queries $m, which is not served"
done

touch "$tmp/stop"
wait "$job_pid"
rc=$?
job_pid=
[ $rc -eq 0 ] || { cat "$tmp/job.out"; fail "job exited $rc"; }
"$report" "$tmp/mon" > "$tmp/report.txt" || fail "gpurun-report exited $?"
cat "$tmp/report.txt"
grep -E "^ +0 .* 0004:04:00.0 .*shared: rank 60\.0% others 25\.0% \(mean SM\)" "$tmp/report.txt" > /dev/null \
  || fail "the report does not split GPU 0 between rank 0 and the others"
[ "$(grep -c 'shared: rank' "$tmp/report.txt")" = 1 ] || fail "only GPU 0 is shared"
set -- "$tmp"/prom/*.prom
[ -e "$1" ] && fail "the .prom files outlived the job: $*"
scrape || fail "scrape after the job"
grep -q '^gpurun_' "$tmp/metrics" && fail "gpurun series still served after the job ended"
echo PASS
