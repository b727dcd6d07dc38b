#!/bin/bash
# run.sh OUTDIR — the measurements that explain issue 26's misses (see
# README.md beside this script), one after another, from the top of the
# tree, as root, with the machine quiet (the lead held the QUIET lock).
set -u
OUT=${1:?OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
step() { echo "== $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*" | tee -a "$OUT/steps.log"; }

step "1 one host, 2 ranks x 2 torch threads: DDP with the compute floor"
for m in mlp cnn; do
	build/weft-run -np 2 $PY perf/ddp_bench --model $m --threads 2 --pairs 3 \
		--backend weft,gloo,none >"$OUT/ddp-$m.txt" 2>&1
done
build/weft-run -np 2 $PY perf/ddp_bench --model transformer --threads 2 --pairs 3 --steps 5 \
	--backend weft,gloo,none >"$OUT/ddp-transformer.txt" 2>&1

step "2 raw TCP through the shaped uplinks"
"$HERE/uplink_probe.sh" "$OUT/probe" >"$OUT/uplink-probe.txt" 2>&1

step "3 Weft alone, uplinks unshaped (10gbit): the ranks' own time on 2 cores"
perf/bench_training.sh --spine-rate 10gbit --ranks-per-host 1,2 --no-mpi --no-gloo --models "" \
	"$OUT/unshaped" >"$OUT/unshaped.log" 2>&1

step "4 DDP cnn across the fabric (R=1 interleaved) with the compute floor"
perf/bench_training.sh --ranks-per-host 1 --orders interleaved --no-mpi --no-gloo \
	--ddp-backends weft,gloo,none "$OUT/ddp-fabric" >"$OUT/ddp-fabric.log" 2>&1

step "5 the shm AllReduce against rhd with 3 ranks on 2 cores, 32 KiB, spin and block"
for w in spin block; do
	for a in shm rhd; do
		echo "## WEFT_WAIT=$w algo $a" >>"$OUT/np3-32k.txt"
		WEFT_WAIT=$w build/allreduce_perf -np 3 -R -a $a -b 32K -e 32K -n 300 -w 20 \
			>>"$OUT/np3-32k.txt" 2>&1
	done
done

step "6 the cross-copy limit around 8 MiB, and the caches"
lscpu | grep -i 'cache\|model name' >"$OUT/copy-cross.txt"
for k in 1 2 3; do
	build/copy_limit -np 2 --cross -b 2M -e 64M -n 20 -w 3 >>"$OUT/copy-cross.txt" 2>&1
	build/allreduce_perf -np 2 -R -b 2M -e 64M -n 20 -w 3 >>"$OUT/copy-cross.txt" 2>&1
done

step "7 ofi against socket, 3 interleaved repeats"
$PY perf/compare --only ofi -r 3 -e 64M --near 200 --near-wait 60 >"$OUT/compare-ofi.txt" 2>&1
step "8 the tuner with 3 ranks on 2 cores: its table, then auto, rhd and shm at 32 KiB, plain buffers"
build/weft-topo -np 3 >"$OUT/np3-tuner.txt" 2>&1
for k in 1 2 3; do
	for a in auto rhd shm; do
		echo "## repeat $k algo $a" >>"$OUT/np3-32k-plain.txt"
		if [ $a = auto ]; then set --; else set -- -a $a; fi
		build/allreduce_perf -np 3 "$@" -b 32K -e 32K -n 300 -w 20 >>"$OUT/np3-32k-plain.txt" 2>&1
	done
done
step "done"
