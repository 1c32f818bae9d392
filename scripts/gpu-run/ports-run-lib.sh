# Sourced by ports2.sh, ports3.sh and ports4.sh (the stage-ports*.sh scripts copy it beside
# them): the deadline-bounded step runner the three share.
#
# The caller sets: dest (the log folder), summary (the summary file), began (`date +%s` at the
# start) and deadline (seconds from `began` for the whole script).
#
# run NAME LIMIT COMMAND...: runs COMMAND under `timeout` for LIMIT seconds, or the time left
# before the deadline if that is less, with stdout and stderr in "$dest/NAME.log", and appends
# "NAME rc=RC Ns" to the summary (rc 124: timed out); with under 10 s left it skips the step
# and says so in the summary.
run() {
  local name=$1 limit=$2; shift 2
  local start; start=$(date +%s)
  local left=$(( deadline - (start - began) ))
  if [ "$left" -lt 10 ]; then echo "SKIPPED $name: past the ${deadline} s deadline" | tee -a "$summary"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout "$limit" "$@" > "$dest/$name.log" 2>&1; local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$(( $(date +%s) - start ))" | tee -a "$summary"
}
