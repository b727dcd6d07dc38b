#!/bin/sh
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
host=$1
shift
exec "/work/main/tests/fabric/fabric.sh" run "$host" -- /bin/sh -c "$*"
