# package.mk — Weft as a system library: make install and uninstall, the
# man pages, the Debian packages (make deb, make deb-test), and the checks
# that keep what they promise (check-packaging in make lint's static part,
# check-package after the build). Included by the Makefile, whose
# variables it uses. docs/install.md says how each is used.

.PHONY: install installable install-lib install-bin install-python uninstall man check-packaging check-package check-man \
	check-abi check-symbols abi-dump deb deb-test check-quick

# ---- where make install puts things ----

# PREFIX and the folders under it, each its own variable as GNU's
# conventions name them (Debian's build passes the multiarch
# LIBDIR=/usr/lib/x86_64-linux-gnu: debian/rules). DESTDIR stages the tree
# elsewhere; what the installed files name (weft.pc, the CMake files, the
# Python package's _install.py, the programs' runpath) is where the files
# will be, under PREFIX, never DESTDIR.
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/Weft
# The Python package goes where $(PYTHON) looks under PREFIX (Debian's
# /usr/local/lib/python3.X/dist-packages; the Debian packages pass
# /usr/lib/python3/dist-packages).
PY_VER := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYDIR  ?= $(PREFIX)/lib/python$(PY_VER)/dist-packages

# The installed programs' runpath: none where the dynamic loader looks by
# itself (/usr/lib and its multiarch folder, where Debian installs), else
# LIBDIR, so that a PREFIX=/opt/weft install runs without LD_LIBRARY_PATH.
MULTIARCH = $(shell $(CC) -print-multiarch 2>/dev/null)
LOADER_DIRS = /lib /usr/lib $(if $(MULTIARCH),/lib/$(MULTIARCH) /usr/lib/$(MULTIARCH))
INSTALL_RPATH ?= $(if $(filter $(patsubst %/,%,$(LIBDIR)),$(LOADER_DIRS)),,$(LIBDIR))

# The programs as installed ($(INST): linked again with INSTALL_RPATH),
# linked anew when INSTALL_RPATH changes (another PREFIX or LIBDIR).
INST_PROGS := $(addprefix $(INST)/,$(notdir $(TOOLS) $(PERF_PROGS)))
PERF_NAMES := $(notdir $(PERF_PROGS))
$(INST_PROGS): $(INST)/runpath
$(INST)/runpath: FORCE
	@mkdir -p $(@D); echo '$(INSTALL_RPATH)' | cmp -s - $@ || echo '$(INSTALL_RPATH)' > $@
FORCE:

# weft.pc and WeftConfig.cmake name folders relative to the prefix where
# they are under it, so that a staged or moved tree stays consistent.
under_prefix = $(patsubst $(PREFIX)/%,%,$(1))
updirs = $(subst $(space),,$(foreach d,$(subst /, ,$(1)),../))
space := $(subst ,, )
PC_SED = -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	-e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
	-e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
	-e 's|@REQUIRES_PRIVATE@|$(filter-out $(DLOPEN_PKGS),$(PKGS))|'
CMAKE_SED = -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@CMAKEDIR@|$(CMAKEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	-e 's|@VERSION_MAJOR@|$(word 1,$(VERSION_PARTS))|g' -e 's|@SOMAJOR@|$(SOMAJOR)|g' \
	-e 's|@CMAKE_TO_PREFIX@|$(if $(filter $(PREFIX)/%,$(CMAKEDIR)),$${CMAKE_CURRENT_LIST_DIR}/$(call updirs,$(call under_prefix,$(CMAKEDIR))),$(PREFIX))|g' \
	-e 's|@LIBDIR_REL@|$(call under_prefix,$(LIBDIR))|g' \
	-e 's|@INCLUDEDIR_REL@|$(call under_prefix,$(INCLUDEDIR))|g' \
	-e 's|@SIZEOF_VOID_P@|$(SIZEOF_VOID_P)|g'
SIZEOF_VOID_P = $(shell echo __SIZEOF_POINTER__ | $(CC) -E -P - 2>/dev/null | tail -n 1)

# The public headers: weft.h and the one it includes.
PUBLIC_HEADERS := include/weft.h include/weft_fault.h

# What make install needs built (debian/rules builds it, then installs).
installable: lib man $(INST_PROGS)

# make install is the three below. install-lib: libweft.so.VERSION with
# its soname link (libweft.so.SOMAJOR) and the link to build with
# (libweft.so); the static library; weft.h; weft.pc; the CMake package
# (Weft::weft). install-bin: weft-topo, weft-run and the perf programs;
# the man pages (each perf program's name a link to weft-perf(1)).
# install-python: the Python package.
install: install-lib install-bin install-python

install-lib: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR)
	install -m 0644 $(BUILD)/libweft.so $(DESTDIR)$(LIBDIR)/libweft.so.$(VERSION)
	ln -sf libweft.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libweft.so.$(SOMAJOR)
	ln -sf libweft.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libweft.so
	install -m 0644 $(BUILD)/libweft.a $(DESTDIR)$(LIBDIR)/libweft.a
	install -p -m 0644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	sed $(PC_SED) weft.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/weft.pc
	sed $(CMAKE_SED) cmake/WeftConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/WeftConfig.cmake
	sed $(CMAKE_SED) cmake/WeftConfigVersion.cmake.in > $(DESTDIR)$(CMAKEDIR)/WeftConfigVersion.cmake

install-bin: man $(INST_PROGS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(INST_PROGS) $(DESTDIR)$(BINDIR)/
	install -m 0644 $(addprefix $(BUILD)/man/,$(MAN1)) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(addprefix $(BUILD)/man/,$(MAN7)) $(DESTDIR)$(MANDIR)/man7/
	for p in $(PERF_NAMES); do ln -sf weft-perf.1 $(DESTDIR)$(MANDIR)/man1/$$p.1; done

# The package, with _version.py (VERSION) and _install.py (where libweft
# is); weft.torch and the torch extension only when the extension is
# built (make python).
install-python:
	@[ -n "$(PY_VER)" ] || { echo "install: $(PYTHON) not found: the Python package is not installed"; exit 0; }; \
	set -e; d=$(DESTDIR)$(PYDIR)/weft; install -d $$d; \
	install -m 0644 python/weft/*.py $$d/; \
	echo '__version__ = "$(VERSION)"  # written by make install from VERSION' > $$d/_version.py; \
	echo 'LIBDIR = "$(LIBDIR)"  # written by make install' > $$d/_install.py; \
	if [ -f $(PY_EXT) ]; then install -d $$d/torch; install -m 0644 python/weft/torch/*.py $$d/torch/; \
		install -m 0644 $(PY_EXT) $$d/; \
	else echo "install: $(PY_EXT) not built (make python): weft.torch is not installed"; fi

# What make install wrote, and the folders it made that are then empty.
uninstall:
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,libweft.so.$(VERSION) libweft.so.$(SOMAJOR) libweft.so libweft.a) \
		$(addprefix $(DESTDIR)$(INCLUDEDIR)/,$(notdir $(PUBLIC_HEADERS))) $(DESTDIR)$(PKGCONFIGDIR)/weft.pc \
		$(DESTDIR)$(CMAKEDIR)/WeftConfig.cmake $(DESTDIR)$(CMAKEDIR)/WeftConfigVersion.cmake \
		$(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS) $(PERF_PROGS))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man1/,$(MAN1) $(PERF_NAMES:=.1)) \
		$(addprefix $(DESTDIR)$(MANDIR)/man7/,$(MAN7))
	rm -rf $(DESTDIR)$(PYDIR)/weft
	-rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null

# ---- man pages ----

# weft(7): concepts and every environment variable (its ENVIRONMENT section
# is what weft-topo prints from the settings the library declares, as
# docs/settings.md is); weft-topo(1), weft-run(1), weft-perf(1) (the perf
# programs). Built into $(BUILD)/man/ from docs/man/*.in, so a page never
# disagrees with the tool; check-man renders each (mandoc -T lint, groff
# -ww) and holds each program's options to its --help.
MAN_SRC   := docs/man
MAN1      := weft-topo.1 weft-run.1 weft-perf.1
MAN7      := weft.7
MAN_PAGES := $(addprefix $(BUILD)/man/,$(MAN1) $(MAN7))
# The pages' date: the release's, from debian/changelog, not the day of
# the build (two builds of one release give the same pages).
MAN_DATE = $(shell date -u -d "$$(sed -n 's/^ -- .*>  //p' debian/changelog | head -n 1)" +%Y-%m-%d)
MAN_SED = -e 's/@VERSION@/$(VERSION)/g' -e 's/@DATE@/$(MAN_DATE)/g' \
	-e 's/@PERF_NAMES@/$(subst $(space),$(comma) ,$(sort $(PERF_NAMES)))/g'

man: $(MAN_PAGES)
$(BUILD)/man/%: $(MAN_SRC)/%.in VERSION debian/changelog mk/package.mk
	@mkdir -p $(@D)
	$(call say,GEN,$@)sed $(MAN_SED) $< > $@.tmp && mv $@.tmp $@
$(BUILD)/man/weft.7: $(MAN_SRC)/weft.7.in $(BUILD)/weft-topo VERSION debian/changelog mk/package.mk
	@mkdir -p $(@D)
	$(call say,GEN,$@)$(BUILD)/weft-topo --settings --format man > $@.env
	@sed $(MAN_SED) -e '/^\.\\" @ENVIRONMENT@$$/{r $@.env' -e 'd' -e '}' $< > $@.tmp
	@rm -f $@.env; mv $@.tmp $@

# ---- checks (make lint) ----

# VERSION against include/weft.h, debian/changelog and CHANGELOG.md; the
# soname's number against debian/control and the symbols file; what the
# library opens with dlopen against libweft0's Recommends.
check-packaging:
	$(call say,LINT,packaging)scripts/check-packaging $(SOMAJOR)

check-package: check-man check-abi check-symbols

check-man: $(MAN_PAGES) $(BUILD)/weft-topo $(BUILD)/weft-run $(PERF_PROGS)
	$(call say,LINT,man)scripts/check-man --build $(BUILD) $(MAN_PAGES)

# The ABI against the baseline api/libweft.abi (abidw's record of the last
# release): a removed function or a changed signature or type fails,
# additions pass (scripts/check-abi says more). make abi-dump records a
# new baseline: at a release, or with a deliberate ABI break (then
# SOMAJOR goes up too).
ABI_REF := api/libweft.abi
check-abi: $(BUILD)/libweft.so
	$(call say,LINT,abi)scripts/check-abi $(ABI_REF) $(BUILD)/libweft.so
abi-dump: $(BUILD)/libweft.so
	scripts/check-abi --dump $(ABI_REF) $(BUILD)/libweft.so

# The exported symbols against debian/libweft0.symbols, as the package
# build checks them (dpkg-gensymbols -c4: one missing or one not listed
# fails), so a new or removed weft_* function is seen before make deb.
# Compared as a version after VERSION: dpkg-gensymbols forgives the loss
# of a symbol that the version it is told it builds introduced.
check-symbols: $(BUILD)/libweft.so
	$(call say,LINT,symbols)dpkg-gensymbols -c4 -plibweft$(SOMAJOR) -v$(VERSION)+check \
		-e$(BUILD)/libweft.so -Idebian/libweft$(SOMAJOR).symbols -O$(BUILD)/libweft.symbols

# ---- Debian packages ----

# make deb: dpkg-buildpackage -us -uc -b on a clean copy of the tracked
# files in $(BUILD)/deb/ (the .debs land there), then lintian; DEB_PROFILES
# (e.g. pkg.weft.notorch) and DEB_BUILD_OPTIONS (nocheck) pass through.
# make deb-test: the built .debs installed into a copy-on-write root of
# this machine and the autopkgtest (debian/tests) run there.
DEB_OUT ?= $(BUILD)/deb
deb:
	scripts/build-deb $(DEB_OUT)
deb-test:
	scripts/deb-test $(DEB_OUT)

# dh_auto_test's subset (debian/rules): the package build runs these; the
# whole suite is CI's (make test).
QUICK_RUNS := unit/util/parse unit/api/review unit/topo/json \
	WEFT_TEST_TRANSPORT=shm:integration/allreduce WEFT_TEST_TRANSPORT=socket:integration/allreduce
check-quick: $(call QUICK_PROGS,$(BUILD),$(QUICK_RUNS)) $(TOOLS)
	@tests/run --build $(BUILD) $(QUICK_RUNS)
