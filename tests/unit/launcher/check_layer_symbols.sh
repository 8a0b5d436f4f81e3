#!/bin/sh
# The layers' dependencies point down at link level too (cmake/GpurunLayers.cmake): no
# layer's objects use a symbol that a layer above or beside it defines (a hand-written prototype
# would get past the include directories, not past this). Every allowed dependency must be seen in
# use, so the check is known to see references across layers at all.
# usage: check_layer_symbols.sh NAME:ALLOWED,ALLOWED OBJ... -- NAME:ALLOWED OBJ... -- ...
set -u
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
names=""
while [ $# -gt 0 ]; do
  spec=$1
  shift
  name=${spec%%:*}
  names="$names $name"
  printf '%s\n' "${spec#*:}" | tr ',' '\n' | sed '/^$/d' > "$dir/$name.allow"
  : > "$dir/$name.objs"
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    printf '%s\n' "$1" >> "$dir/$name.objs"
    shift
  done
  [ $# -gt 0 ] && shift
  [ -s "$dir/$name.objs" ] || { echo "FAIL: layer $name: no objects given"; exit 1; }
  # defined global symbols ("ADDR T name") and undefined ones ("U name")
  xargs nm -g --defined-only < "$dir/$name.objs" | awk 'NF == 3 { print $3 }' | sort -u > "$dir/$name.def"
  xargs nm -u < "$dir/$name.objs" | awk 'NF == 2 { print $2 }' | sort -u > "$dir/$name.und"
  [ -s "$dir/$name.def" ] || { echo "FAIL: layer $name: nm shows no symbols"; exit 1; }
done
status=0
for l in $names; do
  for m in $names; do
    [ "$l" = "$m" ] && continue
    uses=$(comm -12 "$dir/$l.und" "$dir/$m.def")
    if grep -qx "$m" "$dir/$l.allow"; then
      if [ -z "$uses" ]; then
        echo "FAIL: $l may use $m but nm shows no use: the check cannot see references"
        status=1
      else
        echo "ok: $l uses $m ($(printf '%s\n' "$uses" | wc -l) symbols, allowed)"
      fi
    elif [ -n "$uses" ]; then
      echo "FAIL: $l uses symbols of $m, a layer above or beside it:"
      printf '%s\n' "$uses" | sed 's/^/  /' | head -20
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "ok: no layer uses a symbol of a layer above or beside it"
exit $status
