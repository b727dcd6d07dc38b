# Weft — non-recursive Makefile. `make` builds everything into $(BUILD)/.
#   make               library, perf programs, weft tools, tests
#   make test          run the Check suites (what CI runs)
#   make asan-test     the same suites under ASan + UBSan, in build-asan/
#   make asan-quick    the suites CI runs under ASan + UBSan (ASAN_QUICK)
#   make tsan-quick    the threaded suites under ThreadSanitizer (TSAN_QUICK)
#   make valgrind      a 2-rank AllReduce under valgrind memcheck
#   make install PREFIX=/usr/local [LIBDIR=...] [DESTDIR=...]; make uninstall
#   make deb           the Debian packages (dpkg-buildpackage), lintian; deb-test: autopkgtest
#   make fuzz          build the libFuzzer targets (clang) and run each FUZZ_S s
#   make format        clang-format every source file
#   make docs          write docs/settings.md from the declared settings (make lint checks it)
#   make man           the man pages into $(BUILD)/man/ (weft(7) lists the declared settings)
#   make abi-dump      record the library's ABI as the baseline check-abi compares with

BUILD   ?= build
# `make` alone builds everything (rules above `all:` must not become the default)
.DEFAULT_GOAL := all
PREFIX  ?= /usr/local
CC      ?= cc
MPICC   ?= $(shell command -v mpicc 2>/dev/null)
MPICC_MPICH ?= $(shell command -v mpicc.mpich 2>/dev/null)
SANITIZE ?=

# Quiet by default ("CC file"); V=1 shows the whole commands.
V ?= 0

say = $(if $(filter 1,$(V)),,@echo "  $(1)	$(2)";)

# The release: the VERSION file is the one place it is written. The
# header's WEFT_VERSION_* must equal it (the build fails otherwise:
# util/error.c), weft.pc, the CMake files and the Python package get it
# from here, and make lint holds debian/changelog and CHANGELOG.md to it
# (scripts/check-packaging; scripts/set-version writes them all).
VERSION := $(strip $(file <VERSION))
VERSION_PARTS := $(subst ., ,$(VERSION))
ifeq ($(shell echo '$(VERSION)' | grep -Ex '[0-9]+\.[0-9]+\.[0-9]+'),)
$(error VERSION: expected MAJOR.MINOR.PATCH, found '$(VERSION)')
endif
# The ABI's number, not the release's: the soname libweft.so.$(SOMAJOR),
# the symbol version WEFT_$(SOMAJOR) (api/weft.map) and the Debian package
# libweft$(SOMAJOR). It changes only when the ABI breaks, which check-abi
# and the symbols file (debian/libweft0.symbols) make a deliberate act.
SOMAJOR := 0

# liblldpctl's header is optional: without it the leaf comes from
# WEFT_TOPO_FILE or Slurm only (the library itself is opened with dlopen).
HAVE_LLDPCTL := $(shell pkg-config --exists lldpctl && echo 1)
# The verbs transport always builds, against rdma-core's headers
# (libibverbs-dev); libibverbs itself is dlopen'd at run time
# (transports/verbs/verbs_lib.c), so libweft loads where it is missing.
# PMIx (launch/launch_pmix.c): only its headers at build time, and only
# for that file; libpmix itself is dlopen'd at run time, so libweft loads
# where it is missing.
HAVE_PMIX    := $(shell pkg-config --exists pmix && echo 1)
PMIX_CFLAGS  := $(if $(HAVE_PMIX),$(shell pkg-config --cflags pmix) -DWEFT_HAVE_PMIX \
	-DWEFT_PMIX_LIBDIR='"$(shell pkg-config --variable=libdir pmix)"')
# libmicrohttpd serves /metrics (health/metrics_http.c): only its header at
# build time, and only for that file; the library itself is dlopen'd when an
# endpoint starts, so libweft loads where it is missing.
HAVE_MHD     := $(shell pkg-config --exists libmicrohttpd && echo 1)
MHD_CFLAGS   := $(if $(HAVE_MHD),$(shell pkg-config --cflags libmicrohttpd) -DWEFT_HAVE_MHD)
# weft-topo --watch: a terminal view (ncurses) of the job's /metrics (libcurl).
HAVE_WATCH   := $(shell pkg-config --exists ncursesw libcurl && echo 1)
WATCH_CFLAGS := $(if $(HAVE_WATCH),$(shell pkg-config --cflags ncursesw libcurl) -DWEFT_HAVE_WATCH)
WATCH_LIBS   := $(if $(HAVE_WATCH),$(shell pkg-config --libs ncursesw libcurl))
# jansson reads topology files and writes the communicator's self-description;
# zlib packs the bootstrap's allgather results (bootstrap/bootstrap_wire.h).
PKGS      := hwloc libfabric jansson zlib libsodium $(if $(HAVE_LLDPCTL),lldpctl)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(if $(HAVE_LLDPCTL),-DWEFT_HAVE_LLDPCTL)
# libfabric's and liblldpctl's headers only: the ofi transport and the
# LLDP query load the libraries with dlopen (transports/ofi/ofi_lib.c and
# topo/topo_lldp_lib.h say why).
DLOPEN_PKGS := libfabric lldpctl
PKG_LIBS   := $(shell pkg-config --libs $(filter-out $(DLOPEN_PKGS),$(PKGS)) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CFLAGS  ?= -O2 -g
# CPPFLAGS and LDFLAGS as GNU make passes them (dpkg-buildflags' hardening
# in the Debian build: debian/rules).
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) $(CPPFLAGS) -fPIC -fvisibility=hidden -pthread \
	-Iinclude -I. $(PKG_CFLAGS) $(SANITIZE) -MMD -MP
LDLIBS_LIB := $(PKG_LIBS) -pthread -ldl -lm $(SANITIZE)

# The library: every .c under the layers' folders (scripts/layers.txt, the
# one list of them; a new transport or algorithm folder needs no line here).
LIB_DIRS := $(shell awk '$$2 == "lib" { print $$3 }' scripts/layers.txt)
LIB_SRCS := $(sort $(shell find $(LIB_DIRS) -name '*.c'))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)

# The local launcher (-np) of the perf programs, weft-topo and the tests:
# a static library on top of the public API.
LAUNCH_SRCS := $(wildcard tools/launch/*.c)
LAUNCH_OBJS := $(LAUNCH_SRCS:%.c=$(BUILD)/obj/%.o)
LAUNCH_LIB  := $(BUILD)/libweft_launch.a

# The perf programs compile the size parser themselves: it is internal to
# libweft, and the MPI baselines do not link libweft at all.
PERF_COMMON := $(filter-out %_perf.c,$(wildcard perf/perf_*.c)) util/parse.c
PERF_COMMON_OBJS := $(PERF_COMMON:%.c=$(BUILD)/obj/%.o)
.SECONDARY: $(PERF_COMMON_OBJS)
PERF_HDRS   := $(wildcard perf/*.h)
PERF_PROGS  := $(patsubst perf/%.c,$(BUILD)/%,$(filter-out perf/mpi_%,$(wildcard perf/*_perf.c)))
MPI_PERF    := $(if $(MPICC),$(patsubst perf/%.c,$(BUILD)/%,$(wildcard perf/mpi_*_perf.c)))
MPICH_PERF  := $(if $(MPICC_MPICH),$(patsubst perf/mpi_%.c,$(BUILD)/mpich_%,$(wildcard perf/mpi_*_perf.c)))

# The Check suites: one program per file of tests/unit/<layer>/,
# tests/integration/, tests/faults/ and tests/security/ (strangers and
# attackers at every door), linked with the tests' own library
# (tests/lib/: the multi-rank harness and its data, the collectives' checked
# cases, the integration suites' parameters).
TEST_LIB_SRCS := $(wildcard tests/lib/*.c)
TEST_LIB_OBJS := $(TEST_LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_LIB      := $(BUILD)/tests/libweft_test.a
TEST_SRCS := $(wildcard tests/unit/*/*.c tests/integration/*.c tests/faults/*.c tests/security/*.c)
TEST_PROGS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
# Shell tests of the programs (exit 77: skipped, with the reason printed).
TEST_SCRIPTS := $(wildcard tests/programs/test_*.sh) tests/fabric/test_fabric_topo.sh tests/fabric/test_slurm.sh \
	tests/fabric/test_python_fabric.sh tests/fabric/test_congestion.sh tests/fabric/test_failover.sh \
	tests/fabric/test_prometheus.sh tests/fabric/test_detect.sh tests/docs/test_docs.sh \
	tests/python/torch_suite/quick.sh tests/fabric/test_shrink_fabric.sh tests/fabric/test_bench_training.sh

TOOLS := $(BUILD)/weft-topo $(BUILD)/weft-run
# What a libfabric provider streams on its own (the ofi transport's yardstick).
OFI_STREAM := $(BUILD)/ofi_stream
# Defined before the perf target names them (a prerequisite expands where read).
SHRINK_BENCH := $(BUILD)/shrink_bench
STEP_TIME := $(BUILD)/step_time

# The test double for libibverbs (tests/lib/fake_ibverbs/), which the verbs
# tests load through WEFT_IBVERBS_LIB; FAKE_EXPORT marks what it exports.
# It shares the library's liveness check (util/proc.c), compiled in.
FAKE_IBV_SRCS := $(wildcard tests/lib/fake_ibverbs/*.c) util/proc.c
FAKE_IBV      := $(BUILD)/tests/libfake_ibverbs.so

# The transport conformance suite (tests/conformance/): one program that
# runs every case over every configuration of its table (suite.c), one
# configuration after the other, each named in the output; `make test`
# runs it as "conformance".
CONF_SRCS := $(wildcard tests/conformance/*.c)
CONF_PROG := $(BUILD)/tests/conformance
TEST_PROGS += $(CONF_PROG)
$(CONF_PROG): $(CONF_SRCS) $(wildcard tests/conformance/*.h) $(wildcard tests/lib/*.h) $(TEST_LIB) \
		$(BUILD)/libweft.a $(LAUNCH_LIB) | $(FAKE_IBV)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -Itests/lib -o $@ $(CONF_SRCS) $(TEST_LIB) \
		$(LAUNCH_LIB) $(BUILD)/libweft.a $(CHECK_LIBS) $(LDLIBS_LIB)

# The Python package (python/weft) and its torch extension: Debian's
# interpreter explicitly, since the python3 first on PATH may lack torch.
PYTHON  ?= /usr/bin/python3
CXX     ?= c++
CXXFLAGS ?= $(CFLAGS)
PY_SUFFIX := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
HAVE_TORCH := $(shell $(PYTHON) -c 'import importlib.util as u, sys; sys.exit(not u.find_spec("torch"))' \
	2>/dev/null && test -f /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp && \
	test -f /usr/include/pybind11/pybind11.h && echo 1)
PY_EXT  := python/weft/_torch_ext$(PY_SUFFIX)
PY_SRCS := $(wildcard python/csrc/*.cpp)
PY_OBJS := $(PY_SRCS:python/csrc/%.cpp=$(BUILD)/python/%.o)
PY_FLAGS := $(BUILD)/python/torch_flags
CXXWARN := -Wall -Wextra -Werror -Wno-unused-parameter

.PHONY: all lib perf tests test lint lint-src check-docs docs pytest python torch-suite asan-test asan-quick tsan-quick valgrind fuzz fuzz-build format clean
all: lib perf tests $(TOOLS) man $(if $(HAVE_TORCH),python)
lib: $(BUILD)/libweft.so $(BUILD)/libweft.a $(LAUNCH_LIB)
# Limits the figures are compared with (docs/benchmarks.md): libc only, no Weft.
PERF_LIMITS := $(BUILD)/copy_limit $(BUILD)/tcp_limit $(BUILD)/connect_probe $(BUILD)/c2c_latency
# A stranger at the listeners, for perf/bench_flood.sh: libc only.
FLOOD := $(BUILD)/flood
perf: $(PERF_PROGS) $(MPI_PERF) $(MPICH_PERF) $(PERF_LIMITS) $(OFI_STREAM) $(FLOOD) $(SHRINK_BENCH) $(STEP_TIME)
tests: $(TEST_PROGS) $(FAKE_IBV)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/launch/launch_pmix.o: ALL_CFLAGS += $(PMIX_CFLAGS)
$(BUILD)/obj/health/metrics_http.o: ALL_CFLAGS += $(MHD_CFLAGS)
# weft_version() and the check that include/weft.h says the same (util/error.c).
$(BUILD)/obj/util/error.o: ALL_CFLAGS += -DWEFT_BUILD_MAJOR=$(word 1,$(VERSION_PARTS)) \
	-DWEFT_BUILD_MINOR=$(word 2,$(VERSION_PARTS)) -DWEFT_BUILD_PATCH=$(word 3,$(VERSION_PARTS))
$(BUILD)/obj/util/error.o: VERSION

$(BUILD)/libweft.so: $(LIB_OBJS) api/weft.map
	$(call say,CC,$@)$(CC) -shared -Wl,-soname,libweft.so.$(SOMAJOR) -Wl,--version-script=api/weft.map \
		-Wl,--no-undefined $(LDFLAGS) -o $@ $(LIB_OBJS) $(LDLIBS_LIB)
	ln -sf libweft.so $(BUILD)/libweft.so.$(SOMAJOR)

$(BUILD)/libweft.a: $(LIB_OBJS)
	rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(LAUNCH_LIB): $(LAUNCH_OBJS)
	rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

# Where a program finds libweft: beside itself in the build tree ($ORIGIN);
# the copies make install installs are linked again into $(INST) with
# INSTALL_RPATH instead (below), so that no installed file points into
# the build tree.
INST    := $(BUILD)/inst
RUNPATH  = -Wl,-rpath,'$$ORIGIN'
$(INST)/%: RUNPATH = $(addprefix -Wl$(comma)-rpath$(comma),$(INSTALL_RPATH))
comma := ,

# Perf programs link the shared library (their common part compiled once).
define LINK_PERF
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -Iperf -o $@ $< $(PERF_COMMON_OBJS) $(LAUNCH_LIB) -L$(BUILD) \
		-lweft $(RUNPATH) $(LDFLAGS) $(SANITIZE) -lm
endef
$(BUILD)/%_perf: perf/%_perf.c $(PERF_COMMON_OBJS) $(PERF_HDRS) $(BUILD)/libweft.so $(LAUNCH_LIB)
	$(LINK_PERF)
$(INST)/%_perf: perf/%_perf.c $(PERF_COMMON_OBJS) $(PERF_HDRS) $(BUILD)/libweft.so $(LAUNCH_LIB)
	$(LINK_PERF)

$(BUILD)/%_limit: perf/%_limit.c perf/limit_args.h $(BUILD)/obj/util/parse.o
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $(filter-out %.h,$^) $(SANITIZE)

$(FLOOD): perf/flood.c
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $< $(SANITIZE)

# The core-to-core round trip now (perf/compare prints it per run).
$(BUILD)/c2c_latency: perf/c2c_latency.c perf/limit_args.h $(BUILD)/obj/util/parse.o
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $(filter-out %.h,$^) -pthread $(SANITIZE)

# A job that loses ranks and goes on (perf/bench_shrink.sh, the fabric's
# and Slurm's shrink tests).
$(SHRINK_BENCH): perf/shrink_bench.c $(BUILD)/libweft.so $(LAUNCH_LIB)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $< $(LAUNCH_LIB) -L$(BUILD) -lweft \
		-Wl,-rpath,'$$ORIGIN' $(SANITIZE)

# A training loop's calls timed one by one (perf/bench_failover.sh; with -k
# every call checked: tests/fabric/test_failover.sh).
$(STEP_TIME): perf/step_time.c $(BUILD)/libweft.so
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD) -lweft -Wl,-rpath,'$$ORIGIN' $(SANITIZE)

# Descriptors per rank by connection mode (perf/connect_scale runs it).
$(BUILD)/connect_probe: perf/connect_probe.c $(BUILD)/libweft.so $(LAUNCH_LIB)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $< $(LAUNCH_LIB) -L$(BUILD) -lweft \
		-Wl,-rpath,'$$ORIGIN' $(SANITIZE)

$(OFI_STREAM): perf/ofi_stream.c
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $< $(shell pkg-config --libs libfabric) $(SANITIZE)

$(BUILD)/mpi_%_perf: perf/mpi_%_perf.c $(PERF_COMMON) $(PERF_HDRS)
	$(call say,MPICC,$@)$(MPICC) $(ALL_CFLAGS) -Iperf -DPERF_MPI -o $@ $< $(PERF_COMMON) $(SANITIZE) -lm

$(BUILD)/mpich_%_perf: perf/mpi_%_perf.c $(PERF_COMMON) $(PERF_HDRS)
	$(call say,MPICC,$@)$(MPICC_MPICH) $(ALL_CFLAGS) -Iperf -DPERF_MPI -o $@ $< $(PERF_COMMON) $(SANITIZE) -lm

# The torch extension links libweft.so without a path: the package loads
# libweft first (python/weft/_lib.py) and the extension binds to that copy.
python: $(PY_EXT)
$(PY_FLAGS): python/torch_flags.py
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)$(PYTHON) python/torch_flags.py > $@.tmp 2>/dev/null || \
		{ rm -f $@.tmp; $(PYTHON) python/torch_flags.py; exit 1; }
	@mv $@.tmp $@
$(BUILD)/python/%.o: python/csrc/%.cpp $(wildcard python/csrc/*.hpp) $(wildcard include/*.h) $(PY_FLAGS)
	$(call say,CXX,$<)$(CXX) -std=c++17 $(CXXWARN) $(CXXFLAGS) $(CPPFLAGS) -fPIC -pthread -Iinclude \
		$$(sed -n 1p $(PY_FLAGS)) -MMD -MP -c $< -o $@
$(PY_EXT): $(PY_OBJS) $(BUILD)/libweft.so $(PY_FLAGS)
	$(call say,CXX,$@)$(CXX) -shared $(LDFLAGS) -o $@ $(PY_OBJS) -L$(BUILD) -lweft $$(sed -n 2p $(PY_FLAGS))

# weft-topo sits on the public API: it sees include/ and jansson only, and
# links the shared library (and the local launcher for -np).
TOPO_TOOL_SRCS := $(wildcard tools/weft-topo/*.c) util/parse.c
TOPO_TOOL_HDRS := $(wildcard tools/weft-topo/*.h)
TOOL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) $(CPPFLAGS) -pthread -Iinclude -I. \
	$(shell pkg-config --cflags jansson 2>/dev/null) $(SANITIZE)
$(BUILD)/weft-topo $(INST)/weft-topo: $(TOPO_TOOL_SRCS) $(TOPO_TOOL_HDRS) $(BUILD)/libweft.so $(LAUNCH_LIB)
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(TOOL_CFLAGS) $(WATCH_CFLAGS) -o $@ $(TOPO_TOOL_SRCS) $(LAUNCH_LIB) -L$(BUILD) -lweft $(RUNPATH) \
		$(LDFLAGS) $(shell pkg-config --libs jansson 2>/dev/null) $(WATCH_LIBS) $(SANITIZE)

# weft-run: the local launcher (tools/launch) for any program.
$(BUILD)/weft-run $(INST)/weft-run: tools/weft-run/weft_run_main.c $(LAUNCH_LIB) $(BUILD)/libweft.so
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(TOOL_CFLAGS) -o $@ $< $(LAUNCH_LIB) -L$(BUILD) -lweft $(RUNPATH) $(LDFLAGS) $(SANITIZE)

# Tests link the static library so they can reach internal functions.
$(TEST_LIB_OBJS): ALL_CFLAGS += -Itests/lib
$(TEST_LIB): $(TEST_LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(BUILD)/tests/%: tests/%.c $(TEST_LIB) $(wildcard tests/lib/*.h) $(BUILD)/libweft.a $(LAUNCH_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -Itests/lib -o $@ $< $(TEST_LIB) $(LAUNCH_LIB) \
		$(BUILD)/libweft.a $(CHECK_LIBS) $(LDLIBS_LIB)

$(FAKE_IBV): $(FAKE_IBV_SRCS) $(wildcard tests/lib/fake_ibverbs/*.h) util/proc.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(ALL_CFLAGS)) -shared \
		-Wl,-soname,libfake_ibverbs.so -o $@ $(FAKE_IBV_SRCS) -pthread $(SANITIZE)

# The verbs units load the double; so do the integration suites over verbs,
# at run time (`tests` builds it; asan-quick names it).
$(filter $(BUILD)/tests/unit/transports/verbs%,$(TEST_PROGS)): $(FAKE_IBV)

# What `make test` runs (tests/run: one line per run, each run's output in
# $(BUILD)/test-logs/): every Check program, each integration suite once
# per transport it has cases for, the reruns below, the shell suites and
# pytest. A run is [SETTING=VALUE[+SETTING=VALUE...]:]SUITE, SUITE a path
# below tests/ without its extension; WEFT_TEST_TRANSPORT picks one
# transport of an integration suite and WEFT_TEST_ALGO its cases (an
# algorithm, auto, or the case names of the suites that cut across
# collectives; commas between several), tests/lib/integ.h says how.
# over(SUITES,TRANSPORTS[,SETTINGS]): those suites' runs over those transports.
over = $(foreach t,$(2),$(foreach s,$(1),$(if $(3),$(3)+)WEFT_TEST_TRANSPORT=$(t):integration/$(s)))
COLLS := allreduce allgather reduce_scatter broadcast reduce alltoall barrier gather_scatter sendrecv
VERBS_COLLS := allreduce allgather reduce_scatter broadcast reduce alltoall barrier sendrecv failures
# The suites that took over test_colls and test_colls_v (the first ran
# ReduceScatter, Broadcast, Reduce, AlltoAll, Barrier and the mixed
# outstanding operations; the second AlltoAllv, Gather, Scatter and theirs).
COLLS_ONLY := reduce_scatter broadcast reduce alltoall barrier gather_scatter
MIXED := WEFT_TEST_ALGO=mixed,forced
# The gate sits in core, above every transport's sends: every collective
# reruns with it over TCP (each forced algorithm at 2, 3 and 5 ranks, the
# tuner's at 2, 3, 5, 7 and 8), and over shm those whose forced schedules
# take another shape at the 4 and 8 ranks that only the shm runs force
# (recursive halving and doubling, Bruck, binomial trees); the others'
# (ring, pairwise, linear, dissemination, direct) do not.
GATE_SHM := allreduce allgather broadcast reduce

# Suites that run again under settings: the pacer (WEFT_PACER=dcqcn,
# core/pace/) started below line rate, so that every socket connection is
# paced from its first send (on loopback no mark ever comes, and an
# unmarked connection at line rate is not held; over socket only, as
# spraying: shared memory has neither); the test gate that admits
# one message per connection (core/gate.h), where a send that bypasses the
# gate or a schedule that needs two in flight shows; the progress thread,
# which must not change a result; the generic kernels (WEFT_ISA=generic),
# tested as the library dispatches them even on an AVX2 machine (some
# multi-rank jobs set it too); streaming stores for every output
# (reduce/stream.h), which the suites' sizes never reach by default; and
# connections made on each peer's first message (WEFT_CONNECT=lazy) for
# every collective over shm and TCP at 1 to 8 ranks (every forced
# algorithm; for AllReduce and AllGather the tuner's TCP matrix; over
# libfabric every algorithm), with and without a progress thread; and every
# collective over verbs with 3 QPs per connection (WEFT_IB_QPS_PER_CONN),
# rendezvous data sprayed round robin and adaptively; and waits that sleep
# (WEFT_WAIT=block, core/wait.c) for Broadcast, Barrier, the tuner's AllReduces
# (how a rank sleeps does not depend on the algorithm that waits) and the
# non-blocking mixes over shm and TCP, and AllReduce across fake hosts (every
# forced algorithm, rail's network stage included) sleeping at once.
# What these settings change does not depend on how many ranks a job has,
# only on its shape, so a rerun runs each case's jobs of 2, 3 and 4 ranks
# (a pair; an odd count, where halving and doubling, Bruck and the trees
# have a remainder; a power of two with two steps) and leaves out the
# other sizes (WEFT_TEST_NRANKS, tests/lib/integ.h), which the first runs
# cover; the gate's shm reruns keep 8 ranks too (the shapes above), and the
# fake hosts' layouts (each a shape of its own) all run again.
RERUN_NRANKS := WEFT_TEST_NRANKS=2,3,4
GATE_SHM_NRANKS := WEFT_TEST_NRANKS=2,3,4,8
rerun = $(call over,$(1),$(2),$(3)+$(or $(4),$(RERUN_NRANKS)))
RERUNS := $(call rerun,$(COLLS),socket,WEFT_GATE=one) \
	$(call rerun,$(GATE_SHM),shm,WEFT_GATE=one,$(GATE_SHM_NRANKS)) \
	$(call rerun,nonblocking,shm socket,WEFT_GATE=one+$(MIXED)) \
	$(call over,allreduce allgather,hosts,WEFT_GATE=one) \
	$(call rerun,$(VERBS_COLLS),verbs,WEFT_GATE=one) \
	$(call rerun,nonblocking split_group $(COLLS_ONLY),shm socket,WEFT_PROGRESS_THREAD=1) \
	$(call rerun,$(VERBS_COLLS),verbs,WEFT_PROGRESS_THREAD=1) \
	WEFT_ISA=generic:unit/reduce/reduce \
	$(call rerun,allreduce mem,shm socket,WEFT_STREAM_MIN=0) \
	$(call rerun,$(COLLS_ONLY) allreduce,socket,WEFT_PACER=dcqcn+WEFT_PACER_START_RATE=200e6) \
	$(call rerun,allgather,socket,WEFT_PACER=dcqcn+WEFT_PACER_START_RATE=200e6+WEFT_TEST_ALGO=bruck) \
	$(call rerun,nonblocking,socket,WEFT_PACER=dcqcn+WEFT_PACER_START_RATE=200e6+$(MIXED)) \
	$(call rerun,$(COLLS_ONLY),socket,WEFT_SPRAY=adaptive+WEFT_SOCKET_NSOCKS=4) \
	$(call rerun,nonblocking,socket,WEFT_SPRAY=adaptive+WEFT_SOCKET_NSOCKS=4+$(MIXED)) \
	$(call rerun,$(VERBS_COLLS),verbs,WEFT_IB_QPS_PER_CONN=3) \
	$(call rerun,$(VERBS_COLLS),verbs,WEFT_IB_QPS_PER_CONN=3+WEFT_SPRAY=adaptive) \
	$(call rerun,$(COLLS_ONLY),shm socket,WEFT_CONNECT=lazy) \
	$(call rerun,nonblocking,shm socket,WEFT_CONNECT=lazy+$(MIXED)) \
	$(call rerun,allreduce allgather,socket,WEFT_CONNECT=lazy+WEFT_TEST_ALGO=auto) \
	$(call rerun,nonblocking,shm socket,WEFT_CONNECT=lazy+WEFT_PROGRESS_THREAD=1) \
	$(call rerun,collectives,ofi,WEFT_CONNECT=lazy) \
	$(call rerun,allreduce,shm socket,WEFT_WAIT=block+WEFT_TEST_ALGO=auto) \
	$(call rerun,broadcast barrier,shm socket,WEFT_WAIT=block) \
	$(call rerun,nonblocking,shm socket,WEFT_WAIT=block+WEFT_PROGRESS_THREAD=1+$(MIXED)) \
	$(call over,allreduce,hosts,WEFT_WAIT=block+WEFT_WAIT_SPIN=0)

TEST_RUNS := $(patsubst tests/%.c,%,$(sort $(filter tests/unit/%,$(TEST_SRCS)))) conformance \
	$(patsubst tests/%.c,%,$(sort $(filter tests/integration/%,$(TEST_SRCS))) \
	$(sort $(filter tests/faults/%,$(TEST_SRCS))) $(sort $(filter tests/security/%,$(TEST_SRCS)))) \
	$(RERUNS) $(patsubst tests/%.sh,%,$(TEST_SCRIPTS)) pytest

# Inside a Slurm step the tests would learn leaves from the step's own
# topology: they build their own (unit/topo/sources, tests/fabric/).
unexport SLURM_TOPOLOGY_ADDR SLURM_TOPOLOGY_ADDR_PATTERN

# Every run runs; the target fails if any failed (tests/run prints the
# failures' logs and the closing "N passed, N failed, N skipped").
# The fabric tests need root, ip, tc and lldpd (the Slurm one also slurm-wlm
# and munge); they exit 77 (skipped) otherwise.
test: lint tests $(PERF_PROGS) $(PERF_LIMITS) $(SHRINK_BENCH) $(STEP_TIME) $(TOOLS) $(if $(HAVE_TORCH),$(PY_EXT))
	@tests/run --build $(BUILD) $(TEST_RUNS)

# The house rules that a compiler does not check: file and function sizes
# (C and Python), includes that only point down the layers (STYLE.md,
# DESIGN.md), the layer table docs/design.md holds (scripts/layers.txt's),
# clang-format's layout (.clang-format), and flake8 over the Python outside
# tests/ (.flake8; scripts/python-files lists it), the version and the
# Debian packages' promises (check-packaging) -- then the docs that are
# generated (check-docs) and what needs the built library and tools
# (check-package in mk/package.mk: the man pages, the ABI, the symbols).
FORMAT_FILES = $(or $(shell git ls-files '*.c' '*.h' 2>/dev/null),\
	$(shell find include $(LIB_DIRS) tools perf tests -name '*.[ch]'))
lint: lint-src check-docs check-package
lint-src: check-packaging
	$(call say,LINT,sizes)scripts/check-sizes
	$(call say,LINT,layers)scripts/check-layers
	$(call say,LINT,design)scripts/check-layers --doc docs/design.md
	$(call say,LINT,format)clang-format --dry-run -Werror $(FORMAT_FILES)
	$(call say,LINT,python)flake8 $$(scripts/python-files)

# docs/settings.md is what weft-topo prints from the settings the library
# declares: make docs writes it; check-docs fails when the checked-in copy
# differs. Both need the built tool, so in a fresh clone make lint builds
# the library and weft-topo after the static checks above (make -j2 then
# make test, as CI runs them, has them already).
SETTINGS_MD := docs/settings.md
docs: $(BUILD)/weft-topo
	$(call say,GEN,$(SETTINGS_MD))$(BUILD)/weft-topo --settings --format markdown > $(SETTINGS_MD).tmp
	@mv $(SETTINGS_MD).tmp $(SETTINGS_MD)
check-docs: $(BUILD)/weft-topo
	$(call say,LINT,docs)$(BUILD)/weft-topo --settings --format markdown > $(BUILD)/settings.md
	@cmp -s $(BUILD)/settings.md $(SETTINGS_MD) || { diff -u $(SETTINGS_MD) $(BUILD)/settings.md | head -40; \
		echo "$(SETTINGS_MD) is stale: it is not what $(BUILD)/weft-topo --settings --format markdown prints; run make docs"; \
		exit 1; }

# The Python suites (the package against numpy, the torch backend against
# Gloo, DDP); 77 when Debian's interpreter or its numpy/pytest is missing.
# Skipped under ASan: its libweft cannot load into a Python without ASan's runtime.
pytest:
	@if [ -n "$(SANITIZE)" ]; then echo "SKIP: libweft built with $(SANITIZE)"; exit 77; fi; \
	if ! $(PYTHON) -c 'import numpy, pytest' 2>/dev/null; then \
		echo "SKIP: $(PYTHON) with numpy and pytest not found (scripts/install-deps.sh)"; exit 77; fi; \
	WEFT_BUILD=$(BUILD) PYTHONPATH=python $(PYTHON) -m pytest -q -p no:cacheprovider tests/python

# torch's own DistributedTest (tests/python/torch_suite/run.py): every test,
# on Gloo (checked against gloo.txt), on Weft as the "weft" backend, and on
# Weft made in Gloo's place; make test runs the tests Gloo passes
# (tests/python/torch_suite/quick.sh). TORCH_SUITE_FLAGS: more (-j, --repeat).
TORCH_SUITE_FLAGS ?= -j 2
torch-suite: $(if $(HAVE_TORCH),$(PY_EXT))
	WEFT_BUILD=$(BUILD) $(PYTHON) tests/python/torch_suite/run.py --mode all $(TORCH_SUITE_FLAGS)

ASAN_SANITIZE := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
asan-test:
	$(MAKE) BUILD=build-asan SANITIZE="$(ASAN_SANITIZE)" CFLAGS="-O1 -g" HAVE_TORCH= test

# What CI runs under ASan + UBSan within its time (.ci/run): the suites of
# bootstrap, failures, faults, the verdict and deadlines, the parsers, and a sample of
# the collectives over every transport here. make asan-test runs them all.
# Runs as in TEST_RUNS (tests/run); QUICK_PROGS(BUILD,RUNS) their programs.
QUICK_PROGS = $(addprefix $(1)/tests/,$(sort $(foreach r,$(2),$(lastword $(subst :, ,$(r))))))
ASAN_QUICK := unit/bootstrap/bootstrap unit/api/secret unit/bootstrap/doors unit/core/lazy \
	faults/verdict faults/deadline faults/faults integration/failures unit/util/parse unit/topo/json unit/tune/tune \
	unit/health/agree faults/revoke faults/shrink_more \
	$(call over,reduce_scatter broadcast reduce alltoall barrier errors,shm socket) \
	integration/split_group integration/nonblocking integration/collectives \
	security/attacks security/flood unit/api/review unit/core/wait unit/health/slowdet \
	unit/core/watch_silence
# (faults/recorder is not among them: it needs weft-topo, which this build
# does not make, and its fatal-signal case a SIGSEGV that ASan takes first.)
asan-quick:
	$(MAKE) BUILD=build-asan SANITIZE="$(ASAN_SANITIZE)" CFLAGS="-O1 -g" HAVE_TORCH= \
		$(call QUICK_PROGS,build-asan,$(ASAN_QUICK)) build-asan/tests/libfake_ibverbs.so
	@tests/run --build build-asan $(ASAN_QUICK)

# ThreadSanitizer on the suites with more than one thread per rank: the
# progress thread (WEFT_PROGRESS_THREAD=1), the watch's thread (every
# communicator has one; the verdict suite drives it hardest), abort from
# another thread, waits that drive other communicators (split_group's
# "split" cases: parents and children at once), groups whose members the
# progress thread ends (split_group's "groups": a member's end read
# outside its lock let a finished task back into the active list), the
# metrics exporter's thread reading the counters while operations and the
# progress thread write them (the detector's thread too: 3 ranks). Its own
# build, build-tsan/; tests/lib/tsan.supp holds only races inside
# third-party libraries.
TSAN_SANITIZE := -fsanitize=thread
TSAN_QUICK := faults/verdict faults/deadline unit/core/progress_thread faults/revoke \
	WEFT_PROGRESS_THREAD=1+WEFT_TEST_ALGO=auto:integration/nonblocking \
	WEFT_PROGRESS_THREAD=1+WEFT_CONNECT=lazy+WEFT_TEST_ALGO=auto:integration/nonblocking \
	WEFT_PROGRESS_THREAD=1+WEFT_TEST_ALGO=split:integration/split_group unit/api/review \
	WEFT_PROGRESS_THREAD=1+WEFT_TEST_ALGO=groups:integration/split_group \
	unit/core/wait WEFT_WAIT=block+WEFT_PROGRESS_THREAD=1+WEFT_TEST_ALGO=auto:integration/nonblocking \
	WEFT_METRICS_FILE=build-tsan/metrics.%p.prom+WEFT_METRICS_INTERVAL=0.05+WEFT_PROGRESS_THREAD=1+WEFT_TEST_ALGO=auto:integration/nonblocking
tsan-quick:
	$(MAKE) BUILD=build-tsan SANITIZE="$(TSAN_SANITIZE)" CFLAGS="-O1 -g" HAVE_TORCH= \
		$(call QUICK_PROGS,build-tsan,$(TSAN_QUICK))
	@TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 \
		suppressions=$(CURDIR)/tests/lib/tsan.supp" tests/run --build build-tsan $(TSAN_QUICK)

# valgrind memcheck on a 2-rank AllReduce of the perf program (each rank
# its own process: tests/programs/test_valgrind.sh, which make test runs too).
valgrind: $(BUILD)/allreduce_perf
	WEFT_BUILD=$(BUILD) tests/programs/test_valgrind.sh

# libFuzzer targets (tests/fuzz/fuzz_*.c): the library built again with
# clang into build-fuzz/ (-fsanitize=fuzzer-no-link plus ASan and UBSan),
# each target linked with -fsanitize=fuzzer. `make fuzz FUZZ_S=N` runs each
# for N seconds on its committed seeds (tests/fuzz/corpus/NAME, read only)
# and what it finds (build-fuzz/corpus/NAME); a crash, leak, UBSan report
# or an input slower than 10 s fails it, leaving crash-* in build-fuzz/.
FUZZ_BUILD := build-fuzz
FUZZ_S	   ?= 15
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_PROGS := $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard tests/fuzz/fuzz_*.c))

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_BUILD)/libweft.a
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $< $(FUZZ_BUILD)/libweft.a \
		$(PKG_LIBS) -pthread -ldl -lm $(subst fuzzer-no-link,fuzzer,$(SANITIZE))

fuzz-build:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang CFLAGS="-O1 -g" \
		SANITIZE="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" $(FUZZ_PROGS)

fuzz: fuzz-build
	@fail=0; for p in $(FUZZ_PROGS); do n=$${p##*/}; mkdir -p $(FUZZ_BUILD)/corpus/$$n; \
		echo "== $$n ($(FUZZ_S) s)"; \
		if ASAN_OPTIONS=detect_leaks=1 $$p -max_total_time=$(FUZZ_S) -timeout=10 \
			-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/ \
			$(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n > $(FUZZ_BUILD)/$$n.log 2>&1; \
		then grep -h "stat::number_of_executed_units\|DONE" $(FUZZ_BUILD)/$$n.log | tail -2; \
		else fail=1; tail -40 $(FUZZ_BUILD)/$$n.log; echo "$$n: FAILED"; fi; done; \
	[ $$fail -eq 0 ]

format:
	clang-format -i $(shell git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz python/weft/_torch_ext*.so python/build python/*.egg-info

# make install and uninstall, the man pages, the Debian packages, and the
# checks that hold the ABI and the version still (make lint).
include mk/package.mk

-include $(LIB_OBJS:.o=.d) $(LAUNCH_OBJS:.o=.d) $(PY_OBJS:.o=.d) $(TEST_LIB_OBJS:.o=.d) \
	$(filter-out $(LIB_OBJS:.o=.d),$(PERF_COMMON_OBJS:.o=.d))
