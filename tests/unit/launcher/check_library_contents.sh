#!/bin/sh
# libgpurun holds only what a program linked to it can call (cmake/GpurunLayers.cmake): none of the
# monitor's symbols (the supervisor, telemetry, Prometheus output, GPU health) is defined in the
# shared or the static library, neither exported (nm -D) nor hidden (nm, the symbol table). The
# same look finds the base's symbols in both, so the check is known to see hidden symbols at all.
# usage: check_library_contents.sh LIBGPURUN.so LIBGPURUN.a MONITOR_OBJ... -- BASE_OBJ...
set -u
[ $# -ge 4 ] || { echo "usage: $0 LIB.so LIB.a MONITOR_OBJ... -- BASE_OBJ..."; exit 2; }
so=$1
ar=$2
shift 2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
: > "$dir/monitor.objs"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  printf '%s\n' "$1" >> "$dir/monitor.objs"
  shift
done
[ $# -gt 0 ] && shift
: > "$dir/base.objs"
for o in "$@"; do printf '%s\n' "$o" >> "$dir/base.objs"; done
for f in "$so" "$ar"; do
  [ -f "$f" ] || { echo "FAIL: $f does not exist"; exit 1; }
done
for l in monitor base; do
  [ -s "$dir/$l.objs" ] || { echo "FAIL: no $l objects given"; exit 1; }
  xargs nm -g --defined-only < "$dir/$l.objs" | awk 'NF == 3 { print $3 }' | sort -u > "$dir/$l.def"
  [ -s "$dir/$l.def" ] || { echo "FAIL: nm shows no symbols in the $l objects"; exit 1; }
done
# every symbol a library defines, in any table: "ADDR TYPE name" lines (archive member headers and
# undefined symbols have fewer fields)
nm --defined-only "$so" 2>/dev/null | awk 'NF == 3 { print $3 }' > "$dir/so.all"
nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' >> "$dir/so.all"
sort -u -o "$dir/so.all" "$dir/so.all"
nm --defined-only "$ar" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u > "$dir/ar.all"
status=0
for lib in so ar; do
  [ $lib = so ] && file=$so || file=$ar
  seen=$(comm -12 "$dir/base.def" "$dir/$lib.all" | wc -l)
  if [ "$seen" -eq 0 ]; then
    echo "FAIL: nm shows none of the base's symbols in $file: the check cannot see its symbols"
    status=1
  else
    echo "ok: $file defines $seen of the base's symbols (the check sees them)"
  fi
  found=$(comm -12 "$dir/monitor.def" "$dir/$lib.all")
  if [ -n "$found" ]; then
    echo "FAIL: $file defines $(printf '%s\n' "$found" | wc -l) symbols of monitor/:"
    printf '%s\n' "$found" | sed 's/^/  /' | head -20
    status=1
  else
    echo "ok: $file defines none of the $(wc -l < "$dir/monitor.def") symbols of monitor/"
  fi
done
exit $status
