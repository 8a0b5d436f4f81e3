# Sourced by the Slurm and multinode test harnesses: cleanup that runs however the test ends.
#
# ctest ends a test past its TIMEOUT with SIGKILL to the whole process tree, so a trap alone is not
# enough: daemons and namespaces would outlive the test. gr_guard_start therefore also starts a
# reaper, detached from the tree (double fork + setsid), that waits for the test's shell to
# disappear and then runs the same cleanup. The cleanup is a script file that must be idempotent:
# it runs once from the trap (normal exit, failure, INT/TERM/HUP) and again from the reaper.
#
#   gr_guard_start FILE   FILE: the cleanup script, written by the caller before or after
#   gr_guard_run          run the cleanup now (also what the trap does)

gr_guard_start() {
  GR_GUARD_FILE=$1
  [ -f "$GR_GUARD_FILE" ] || : >"$GR_GUARD_FILE"
  # The reaper polls the test shell's PID; when the shell is gone it runs the cleanup once.
  # It runs with no stdio tied to ctest, so ctest does not wait for it.
  _gr_me=$$
  ( setsid sh -c "while kill -0 $_gr_me 2>/dev/null; do sleep 0.5; done
                  [ -f '$GR_GUARD_FILE' ] && sh '$GR_GUARD_FILE'; rm -f '$GR_GUARD_FILE'" \
      </dev/null >/dev/null 2>&1 & )
  trap 'gr_guard_run' EXIT
  trap 'gr_guard_run; trap - EXIT; exit 130' INT
  trap 'gr_guard_run; trap - EXIT; exit 143' TERM
  trap 'gr_guard_run; trap - EXIT; exit 129' HUP
}

gr_guard_run() {
  if [ -n "${GR_GUARD_FILE:-}" ] && [ -f "$GR_GUARD_FILE" ]; then
    sh "$GR_GUARD_FILE" || true
    rm -f "$GR_GUARD_FILE"
  fi
}

# Kill, by PID, every process whose environment holds the exact line NAME=VALUE (a marker the
# harness exported and nothing else carries), then wait for them to go: SIGTERM, 3 s, SIGKILL.
# Used for job steps a daemon left behind; never kills by program name.
gr_kill_by_env_marker() {
  _mark="$1=$2"
  _pids=
  for _p in /proc/[0-9]*; do
    _pid=${_p#/proc/}
    # Not this shell, nor the one that runs it (the test itself, or the reaper).
    [ "$_pid" = "$$" ] || [ "$_pid" = "$PPID" ] && continue
    if grep -qszxF -- "$_mark" "$_p/environ" 2>/dev/null; then
      _pids="$_pids $_pid"
    fi
  done
  [ -n "$_pids" ] || return 0
  kill -TERM $_pids 2>/dev/null || true
  _i=0
  while [ $_i -lt 30 ]; do
    _alive=
    for _pid in $_pids; do kill -0 "$_pid" 2>/dev/null && _alive="$_alive $_pid"; done
    [ -n "$_alive" ] || return 0
    sleep 0.1; _i=$((_i + 1))
  done
  kill -KILL $_alive 2>/dev/null || true
}
