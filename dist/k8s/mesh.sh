#!/bin/sh
# mesh.sh SELF TARGET...
# netperf from this node (SELF, one of the targets) to every other target;
# one line per pair: "mesh SELF TARGET FIGURE", or "mesh SELF TARGET FAILED
# why". Exit status 1 if any pair failed.
# Environment: MESH_TEST (TCP_STREAM), MESH_LENGTH (10 s), MESH_ARGS
# (global options, e.g. "-p 12865"), MESH_TEST_ARGS (after --, e.g.
# "-P ,50000 --flows 4"), NETPERF (netperf).
set -u
self=$1
shift
test=${MESH_TEST:-TCP_STREAM}
length=${MESH_LENGTH:-10}
netperf=${NETPERF:-netperf}
status=0
for target in "$@"; do
    [ "$target" = "$self" ] && continue
    # shellcheck disable=SC2086 # the argument lists are meant to split
    if out=$("$netperf" -H "$target" -t "$test" -l "$length" -P 0 ${MESH_ARGS:-} -- ${MESH_TEST_ARGS:-} 2>&1); then
        # the first row's last column: the test's figure
        figure=$(printf '%s\n' "$out" | awk 'NF { print $NF; exit }')
        echo "mesh $self $target $figure"
    else
        echo "mesh $self $target FAILED $(printf '%s' "$out" | tr '\n' ' ')"
        status=1
    fi
done
exit $status
