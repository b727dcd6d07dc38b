#!/usr/bin/env bash
# Install the Debian packages Weft builds, tests and benchmarks with.
# Installs only what is missing; needs root (or sudo) only when something is.
set -euo pipefail

pkgs=(
	build-essential pkg-config
	libhwloc-dev libfabric-dev libfabric-bin libjansson-dev check zlib1g-dev
	# the job key: HMAC-SHA256 handshakes and datagrams (util/auth.h)
	libsodium-dev
	openmpi-bin libopenmpi-dev mpich libmpich-dev
	liblldpctl-dev lldpd libibverbs-dev rdma-core
	iproute2 nftables ethtool time graphviz hwloc clang-format
	# make lint's Python checker (pyflakes and pycodestyle; .flake8)
	flake8
	# clang and its runtime (libFuzzer, ASan, UBSan): make fuzz
	clang libclang-rt-14-dev
	libpmix-dev slurm-wlm munge util-linux
	# memcheck on a 2-rank AllReduce: tests/test_valgrind.sh, make valgrind
	valgrind
	# Debian's /usr/bin/python3 (the python3 first on PATH may be another
	# one): the shell tests' JSON checks, the Python package and the
	# torch.distributed backend; python3-torch also gives torchrun for
	# tests/fabric/test_slurm.sh's PyTorch job and the Gloo peer docs/benchmarks.md compares with.
	python3 python3-dev python3-numpy python3-pytest
	python3-torch libtorch-dev pybind11-dev g++
	# the /metrics endpoint (health/metrics_http.c loads libmicrohttpd with
	# dlopen; the header at build time), Prometheus and node_exporter for
	# its tests (tests/fabric/test_prometheus.sh, tests/programs/test_metrics.sh:
	# promtool checks the metrics and docs/observability-alerts.yml),
	# weft-topo --watch (ncurses, libcurl) and its tmux test, and stress(1)
	# for the detector's soak (perf/detect_trials --soak)
	libmicrohttpd-dev prometheus prometheus-node-exporter
	libncurses-dev libcurl4-openssl-dev tmux curl stress
	# Weft as a system library (docs/install.md): the Debian packages and
	# their checks (make deb: debhelper, dh-python, lintian; make
	# deb-test: autopkgtest), the ABI check (make lint's check-abi:
	# abigail-tools), the man pages' (check-man: mandoc, groff-base;
	# man-db's man -l), CMake's find_package test and pip's (cmake,
	# python3-setuptools, python3-pip, python3-venv, python3-wheel:
	# tests/programs/test_install.sh, test_pip.sh)
	debhelper dh-python lintian autopkgtest abigail-tools mandoc groff-base man-db
	cmake python3-setuptools python3-pip python3-venv python3-wheel
	# test_install.sh's static link (pkg-config --static weft): hwloc.pc
	# names -ludev, which Debian's libhwloc-dev does not bring
	libudev-dev
)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Packages such as lldpd, rdma-core, munge, slurm-wlm (slurmctld, slurmd),
# prometheus and prometheus-node-exporter start daemons when installed;
# the tests start their own, inside network namespaces or on loopback
# (tests/fabric/slurm.sh: its own munged, SLURM_CONF and topology.conf;
# tests/fabric/test_prometheus.sh: its own Prometheus), and nothing may
# talk on the machine's real interfaces.
# Keep services from starting unless the machine already has a policy about
# it.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod 755 "$policy"
	trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
