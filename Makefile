# Weft — non-recursive Makefile. `make` builds everything into $(BUILD)/.
#   make               library, perf programs, weft tools, tests
#   make test          run the Check suites (what CI runs)
#   make asan-test     the same suites under ASan + UBSan, in build-asan/
#   make install PREFIX=/usr/local
#   make format        clang-format every source file

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
MPICC   ?= $(shell command -v mpicc 2>/dev/null)
MPICC_MPICH ?= $(shell command -v mpicc.mpich 2>/dev/null)
SANITIZE ?=

# Quiet by default ("CC file"); V=1 shows the whole commands.
V ?= 0

say = $(if $(filter 1,$(V)),,@echo "  $(1)	$(2)";)

VERSION := 0.1.0
SOMAJOR := 0

# liblldpctl is optional: without it the leaf comes from WEFT_TOPO_FILE only.
HAVE_LLDPCTL := $(shell pkg-config --exists lldpctl && echo 1)
# Detected for the verbs transport to come.
HAVE_VERBS   := $(shell pkg-config --exists libibverbs && echo 1)
# jansson reads topology files and writes the communicator's self-description.
PKGS      := hwloc libfabric jansson $(if $(HAVE_LLDPCTL),lldpctl)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(if $(HAVE_LLDPCTL),-DWEFT_HAVE_LLDPCTL)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden -pthread \
	-Iinclude -Isrc -I. $(PKG_CFLAGS) $(SANITIZE) -MMD -MP
LDLIBS_LIB := $(PKG_LIBS) -pthread -ldl -lm $(SANITIZE)

# The library: every .c under these folders (a new transport or algorithm
# folder needs no line here).
LIB_DIRS := src tune algorithms transports topo
LIB_SRCS := $(sort $(shell find $(LIB_DIRS) -name '*.c'))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)

# The local launcher (-np) of the perf programs, weft-topo and the tests:
# a static library on top of the public API.
LAUNCH_SRCS := $(wildcard tools/launch/*.c)
LAUNCH_OBJS := $(LAUNCH_SRCS:%.c=$(BUILD)/obj/%.o)
LAUNCH_LIB  := $(BUILD)/libweft_launch.a

# The perf programs compile the size parser themselves: it is internal to
# libweft, and the MPI baselines do not link libweft at all.
PERF_COMMON := $(filter-out %_perf.c,$(wildcard perf/perf_*.c)) src/util/parse.c
PERF_HDRS   := $(wildcard perf/*.h)
PERF_PROGS  := $(patsubst perf/%.c,$(BUILD)/%,$(filter-out perf/mpi_%,$(wildcard perf/*_perf.c)))
MPI_PERF    := $(if $(MPICC),$(patsubst perf/%.c,$(BUILD)/%,$(wildcard perf/mpi_*_perf.c)))
MPICH_PERF  := $(if $(MPICC_MPICH),$(patsubst perf/mpi_%.c,$(BUILD)/mpich_%,$(wildcard perf/mpi_*_perf.c)))

TEST_HARNESS := tests/harness.c
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_PROGS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
# Shell tests of the programs (exit 77: skipped, with the reason printed).
TEST_SCRIPTS := $(wildcard tests/test_*.sh) tests/fabric/test_fabric_topo.sh

TOOLS := $(BUILD)/weft-topo

.PHONY: all lib perf tests test lint asan-test install format clean
all: lib perf tests $(TOOLS)
lib: $(BUILD)/libweft.so $(BUILD)/libweft.a $(LAUNCH_LIB)
# Limits the figures are compared with (BENCH.md): libc only, no Weft.
PERF_LIMITS := $(BUILD)/copy_limit $(BUILD)/tcp_limit
perf: $(PERF_PROGS) $(MPI_PERF) $(MPICH_PERF) $(PERF_LIMITS)
tests: $(TEST_PROGS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libweft.so: $(LIB_OBJS) src/weft.map
	$(call say,CC,$@)$(CC) -shared -Wl,-soname,libweft.so.$(SOMAJOR) -Wl,--version-script=src/weft.map \
		-Wl,--no-undefined -o $@ $(LIB_OBJS) $(LDLIBS_LIB)
	ln -sf libweft.so $(BUILD)/libweft.so.$(SOMAJOR)

$(BUILD)/libweft.a: $(LIB_OBJS)
	rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(LAUNCH_LIB): $(LAUNCH_OBJS)
	rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

# Perf programs link the shared library, found next to them.
$(BUILD)/%_perf: perf/%_perf.c $(PERF_COMMON) $(PERF_HDRS) $(BUILD)/libweft.so $(LAUNCH_LIB)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -Iperf -o $@ $< $(PERF_COMMON) $(LAUNCH_LIB) -L$(BUILD) -lweft \
		-Wl,-rpath,'$$ORIGIN' $(SANITIZE) -lm

$(BUILD)/%_limit: perf/%_limit.c $(BUILD)/obj/src/util/parse.o
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $^ $(SANITIZE)

$(BUILD)/mpi_%_perf: perf/mpi_%_perf.c $(PERF_COMMON) $(PERF_HDRS)
	$(call say,MPICC,$@)$(MPICC) $(ALL_CFLAGS) -Iperf -DPERF_MPI -o $@ $< $(PERF_COMMON) $(SANITIZE) -lm

$(BUILD)/mpich_%_perf: perf/mpi_%_perf.c $(PERF_COMMON) $(PERF_HDRS)
	$(call say,MPICC,$@)$(MPICC_MPICH) $(ALL_CFLAGS) -Iperf -DPERF_MPI -o $@ $< $(PERF_COMMON) $(SANITIZE) -lm

# weft-topo sits on the public API: it sees include/ and jansson only, and
# links the shared library (and the local launcher for -np).
TOPO_TOOL_SRCS := $(wildcard tools/weft-topo/*.c) src/util/parse.c
TOPO_TOOL_HDRS := $(wildcard tools/weft-topo/*.h)
TOOL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) -pthread -Iinclude -Isrc -I. \
	$(shell pkg-config --cflags jansson 2>/dev/null) $(SANITIZE)
$(BUILD)/weft-topo: $(TOPO_TOOL_SRCS) $(TOPO_TOOL_HDRS) $(BUILD)/libweft.so $(LAUNCH_LIB)
	$(call say,CC,$@)$(CC) $(TOOL_CFLAGS) -o $@ $(TOPO_TOOL_SRCS) $(LAUNCH_LIB) -L$(BUILD) -lweft -Wl,-rpath,'$$ORIGIN' \
		$(shell pkg-config --libs jansson 2>/dev/null) $(SANITIZE)

# Tests link the static library so they can reach internal functions.
$(BUILD)/tests/%: tests/%.c $(TEST_HARNESS) tests/harness.h $(BUILD)/libweft.a $(LAUNCH_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -Itests -o $@ $< $(TEST_HARNESS) $(LAUNCH_LIB) \
		$(BUILD)/libweft.a $(CHECK_LIBS) $(LDLIBS_LIB)

# Suites that run again under a setting (SETTING=VALUE:suite): the test
# gate that admits one message per connection (core/gate.h), where a send
# that bypasses the gate or a schedule that needs two in flight shows; the
# progress thread, which must not change a result; the generic kernels
# (WEFT_ISA=generic), tested as the library dispatches them even on an AVX2
# machine (some multi-rank jobs set it too); and streaming stores for every
# output (reduce/stream.h), which the suites' sizes never reach by default.
RERUNS := $(foreach t,test_colls test_allreduce test_allgather test_algos_a test_algos_b \
	test_algos_hier,WEFT_GATE=one:$(t)) \
	$(foreach t,test_nonblocking test_colls test_split_group,WEFT_PROGRESS_THREAD=1:$(t)) \
	WEFT_ISA=generic:test_reduce WEFT_STREAM_MIN=0:test_allreduce WEFT_STREAM_MIN=0:test_mem

# Every suite runs; the target fails if any failed. Each prints Check's
# "N%: Checks: X, Failures: Y, Errors: Z" line. The kernel suite runs a
# second time with WEFT_ISA=generic, so that the generic kernels are tested
# as the library dispatches them even on an AVX2 machine (some multi-rank
# jobs set it too).
# The fabric test needs root, ip, tc and lldpd; it exits 77 (skipped) otherwise.
# The last line counts the test programs: "N passed, N failed, N skipped".
test: lint tests $(PERF_PROGS) $(TOOLS)
	@pass=0; fail=0; skip=0; failed=; for t in $(TEST_PROGS); do \
		echo "== $$t"; if WEFT_BUILD=$(BUILD) $$t; then pass=$$((pass+1)); else fail=$$((fail+1)); failed="$$failed $${t##*/}"; fi; \
	done; \
	for r in $(RERUNS); do \
		set=$${r%%:*}; t=$(BUILD)/tests/$${r#*:}; echo "== $$set $$t"; \
		if env $$set WEFT_BUILD=$(BUILD) $$t; then pass=$$((pass+1)); else fail=$$((fail+1)); failed="$$failed $$set:$${t##*/}"; fi; \
	done; \
	for t in $(TEST_SCRIPTS); do \
		echo "== $$t"; WEFT_BUILD=$(BUILD) $$t; rc=$$?; \
		if [ $$rc -eq 77 ]; then skip=$$((skip+1)); elif [ $$rc -ne 0 ]; then fail=$$((fail+1)); failed="$$failed $${t##*/}"; else pass=$$((pass+1)); fi; \
	done; \
	[ -z "$$failed" ] || echo "failed:$$failed"; \
	echo "$$pass passed, $$fail failed, $$skip skipped"; \
	[ $$fail -eq 0 ]

# The house rules that a compiler does not check: file and function sizes,
# and includes that only point down the layers (STYLE.md, DESIGN.md).
lint:
	$(call say,LINT,sizes)scripts/check-sizes
	$(call say,LINT,layers)scripts/check-layers

asan-test:
	$(MAKE) BUILD=build-asan SANITIZE="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		CFLAGS="-O1 -g" test

install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/libweft.so $(DESTDIR)$(PREFIX)/lib/libweft.so.$(VERSION)
	ln -sf libweft.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libweft.so.$(SOMAJOR)
	ln -sf libweft.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libweft.so
	install -m 0644 $(BUILD)/libweft.a $(DESTDIR)$(PREFIX)/lib/libweft.a
	install -m 0644 include/weft.h $(DESTDIR)$(PREFIX)/include/weft.h
	for p in $(PERF_PROGS) $(TOOLS); do install -m 0755 $$p $(DESTDIR)$(PREFIX)/bin/; done
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' weft.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/weft.pc

format:
	clang-format -i $(shell git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan

-include $(LIB_OBJS:.o=.d) $(LAUNCH_OBJS:.o=.d)
