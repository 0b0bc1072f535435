# visdev - build, test and install (GNU make, Linux).
#
#   make                 build libvisdev (static and shared) and visdev
#   make demo            install missing build dependencies, build, run the demo
#   make check           install missing test dependencies, build, run every test
#   make install PREFIX=/usr/local   (program, libraries, header, man page, docs)
#   make python          the Python module (BUILD/python/lib) and its wheel (BUILD/python)
#   make fuzz            run each fuzz target for FUZZ_SECONDS (clang, libFuzzer)
#   make bench           run the benchmarks in bench/
#   make format          format the C sources with .clang-format (format-check: only check)
#
# DEVELOPER=1 adds -Werror and the long warning list; SANITIZE=address,undefined
# builds with sanitizers. Each variant builds in its own folder (BUILD).

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/visdev
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
# zsh looks in vendor-completions for a distribution's (/usr), in site-functions elsewhere
ZSHCOMPDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/share/zsh/vendor-completions,$(PREFIX)/share/zsh/site-functions)
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR ?=

CFLAGS ?= -O2 -g
FUZZ_SECONDS ?= 30
VERSION := $(shell sed -n 's/^\#define VD_VERSION "\(.*\)"/\1/p' include/visdev.h)

variant := $(if $(SANITIZE),-san)$(if $(DEVELOPER),-dev)$(if $(findstring clang,$(CC)),-clang)
BUILD ?= build$(variant)

WARN := -Wall -Wextra
ifdef DEVELOPER
WARN += -Werror -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
	-Wwrite-strings -Wundef -Wvla -Wcast-qual -fno-common
endif
ifdef SANITIZE
CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
endif

ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -Iinclude -Isrc/lib $(WARN) $(CFLAGS)
LIB_CFLAGS = $(ALL_CFLAGS) -fPIC -fvisibility=hidden
LIBS = -ljansson -ldl
CURSES_LIBS = -lncursesw -ltinfo

LIB_SRC := $(wildcard src/lib/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
LIB_OBJ := $(LIB_SRC:src/lib/%.c=$(BUILD)/obj/lib/%.o) $(BUILD)/obj/lib/demo_json.o
CLI_OBJ := $(CLI_SRC:src/cli/%.c=$(BUILD)/obj/cli/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
MOCK_DIR := $(BUILD)/tests/mock-nvml
MOCKS := $(MOCK_DIR)/libnvidia-ml.so.1 $(MOCK_DIR)/old/libnvidia-ml.so.1 $(MOCK_DIR)/libcuda.so.1
SHIM_DIR := $(BUILD)/tests/shim
SHIMS := $(SHIM_DIR)/replace-lock.so
CLI_TESTS := $(wildcard tests/cli/*.bats)
COMMANDS := list map pick run leases queue doctor top
MANPAGES := $(COMMANDS:%=$(BUILD)/man/visdev-%.1)
DOCS := $(wildcard docs/*.md)
# a real Slurm on this host: they start it when root, and say they skip otherwise; not
# under sanitizers, where the Slurm dispatcher's C is left to its unit tests and fuzz
# target (CI's ten minutes)
SLURM_TESTS := $(if $(SANITIZE),,$(wildcard tests/slurm/*.bats))
# the Debian packages, installed and purged (root only): plain builds, so not under sanitizers
DEB_TESTS := $(if $(SANITIZE),,$(wildcard tests/deb/*.bats))

STATIC_LIB := $(BUILD)/libvisdev.a
SHARED_LIB := $(BUILD)/libvisdev.so.0
PROGRAM := $(BUILD)/visdev

CHECK_DEPS := gcc make perl python3 libjansson-dev libncurses-dev libcmocka-dev bats jq tmux fish \
	slurm-wlm munge groff-base man-db debhelper dh-python dpkg-dev lintian \
	python3-dev python3-pytest python3-setuptools python3-wheel python3-venv
DEMO_DEPS := gcc make libjansson-dev libncurses-dev

.PHONY: FORCE all demo check test test-build deps-check deps-demo install uninstall man-check deb python python-test fuzz bench format \
	format-check clean
.DELETE_ON_ERROR:

all: $(STATIC_LIB) $(SHARED_LIB) $(PROGRAM) $(MANPAGES)

$(BUILD)/obj/lib/%.o: src/lib/%.c include/visdev.h src/lib/internal.h
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c -o $@ $<

# The demo server is a fixture compiled into the library as a C string.
$(BUILD)/gen/demo_json.c: src/lib/demo.json
	@mkdir -p $(@D)
	{ printf 'const char demo_json[] =\n'; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/\t"/' -e 's/$$/\\n"/' $<; \
	  printf ';\n'; } > $@

$(BUILD)/obj/lib/demo_json.o: $(BUILD)/gen/demo_json.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c -o $@ $<

$(BUILD)/obj/cli/%.o: src/cli/%.c include/visdev.h $(wildcard src/cli/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc/cli -c -o $@ $<

$(STATIC_LIB): $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(SHARED_LIB): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libvisdev.so.0 $(LDFLAGS) -o $@ $^ $(LIBS)

$(PROGRAM): $(CLI_OBJ) $(STATIC_LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(STATIC_LIB) $(LIBS) $(CURSES_LIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c $(STATIC_LIB) $(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS) -lcmocka

# A page per command, from the program's own help (scripts/manpage), checked by groff.
$(BUILD)/man/visdev-%.1: $(PROGRAM) scripts/manpage
	@mkdir -p $(@D)
	scripts/manpage $(PROGRAM) $* $(VERSION) > $@

man-check: $(MANPAGES)
	@for p in docs/visdev.1 $(MANPAGES); do \
		out=$$(groff -ww -man -z $$p 2>&1); \
		[ -z "$$out" ] || { echo "$$p: $$out"; exit 1; }; \
	done; echo "manual pages: $(words $(MANPAGES) docs/visdev.1) pages, no groff warning"

# top's layout: the program's pure parts (all but main, the commands and the queue's dispatchers), with the library.
TOPVIEW_OBJ := $(filter-out $(BUILD)/obj/cli/main.o $(BUILD)/obj/cli/cmd_%.o $(BUILD)/obj/cli/queue_%.o,$(CLI_OBJ))

$(BUILD)/tests/unit/test_topview: tests/unit/test_topview.c $(TOPVIEW_OBJ) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc/cli $(LDFLAGS) -o $@ $< $(TOPVIEW_OBJ) $(STATIC_LIB) $(LIBS) -lcmocka

# The escaping of text output lives in the program, not the library.
$(BUILD)/tests/unit/test_quote: tests/unit/test_quote.c src/cli/quote.c src/cli/quote.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Isrc/cli $(LDFLAGS) -o $@ $< src/cli/quote.c -lcmocka

# The GPU check's program: built with the tests so that it never rots.
$(BUILD)/tests/gpu/check: tests/gpu/check.c $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

# The stand-in NVML serves a fixture through NVML's C API; the "old" one
# lacks the versioned entry points of newer drivers. It reads fixtures with
# the library's own parser and exports nothing but NVML's names.
MOCK_LDFLAGS = -shared -Wl,--version-script=tests/mock-nvml/exports.map $(LDFLAGS)

$(MOCK_DIR)/libnvidia-ml.so.1: tests/mock-nvml/mock-nvml.c $(STATIC_LIB) tests/mock-nvml/exports.map
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(MOCK_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

$(MOCK_DIR)/old/libnvidia-ml.so.1: tests/mock-nvml/mock-nvml.c $(STATIC_LIB) tests/mock-nvml/exports.map
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -DMOCK_NVML_OLD $(MOCK_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

$(MOCK_DIR)/libcuda.so.1: tests/mock-nvml/mock-cuda.c $(STATIC_LIB) tests/mock-nvml/exports.map
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(MOCK_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

# Shims preloaded into visdev to make a race certain (a lock file replaced mid-lock).
$(SHIM_DIR)/%.so: tests/shim/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared $(LDFLAGS) -o $@ $< -ldl

deps-check:
	@scripts/deps $(CHECK_DEPS)

deps-demo:
	@scripts/deps $(DEMO_DEPS)

demo: deps-demo
	@$(MAKE) --no-print-directory all
	@echo '$$ visdev --demo list'
	@$(PROGRAM) --demo list
	@echo
	@echo "# the guide's example, counting as nvidia-smi does: cuda:0 is the RTX 3090"
	@echo '$$ visdev --demo map 2,1 --order pci'
	@$(PROGRAM) --demo map 2,1 --order pci
	@echo
	@echo "# the same value in CUDA's default order (CUDA_DEVICE_ORDER unset): other GPUs"
	@echo '$$ visdev --demo map 2,1'
	@$(PROGRAM) --demo map 2,1
	@echo
	@echo '# the program is $(PROGRAM); to call it visdev, as the README does:'
	@echo '#   make install PREFIX=$$HOME/.local && export PATH=$$HOME/.local/bin:$$PATH'

check: deps-check
	@$(MAKE) --no-print-directory test

# The Python module, built by setuptools from the library's sources (Debian's
# python3, whose headers python3-dev has), and its wheel; nothing lands in python/.
PYTHON ?= /usr/bin/python3
PYBUILD = $(abspath $(BUILD))/python

python: $(BUILD)/gen/demo_json.c
	@mkdir -p $(PYBUILD)
	@echo "building the Python module and its wheel in $(PYBUILD)"
	@cd python && VISDEV_BUILD=$(abspath $(BUILD)) $(PYTHON) setup.py -q \
		egg_info --egg-base $(PYBUILD) build --build-base $(PYBUILD)/setuptools \
		--build-lib $(PYBUILD)/lib bdist_wheel --bdist-dir $(PYBUILD)/wheel \
		--dist-dir $(PYBUILD) >$(PYBUILD)/setup.log 2>&1 || { cat $(PYBUILD)/setup.log; exit 1; }

# The module's tests (pytest) under a plain build; sanitizers stop at the C.
PYTEST = $(if $(SANITIZE),,python-test)

python-test: python $(PROGRAM) $(MOCKS)
	VISDEV_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider python/tests

# Every test under prove: cmocka speaks TAP when asked, bats by default.
# What the tests need built; `make -j2 test-build` first builds it in parallel (CI does).
TEST_BUILD := all man-check $(UNIT_BIN) $(MOCKS) $(SHIMS) $(BUILD)/tests/gpu/check
test-build: $(TEST_BUILD)

test: $(TEST_BUILD) $(PYTEST)
	VISDEV=$(abspath $(PROGRAM)) MOCK_NVML_DIR=$(abspath $(MOCK_DIR)) SHIM_DIR=$(abspath $(SHIM_DIR)) \
	CMOCKA_MESSAGE_OUTPUT=TAP LC_ALL=C \
	prove --exec '' $(UNIT_BIN) $(CLI_TESTS) $(SLURM_TESTS) $(DEB_TESTS)

FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,build-fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
# The library is compiled once for all targets, instrumented for the fuzzer (not linked with it).
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc/lib -Itests/unit -g -O1 -fno-sanitize-recover=all
FUZZ_OBJ := $(LIB_SRC:src/lib/%.c=build-fuzz/obj/%.o) build-fuzz/obj/demo_json.o

build-fuzz/gen/demo_json.c: $(BUILD)/gen/demo_json.c
	@mkdir -p $(@D)
	cp $< $@

build-fuzz/obj/%.o: src/lib/%.c include/visdev.h src/lib/internal.h
	@mkdir -p $(@D)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

build-fuzz/obj/demo_json.o: build-fuzz/gen/demo_json.c
	@mkdir -p $(@D)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

build-fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ) include/visdev.h src/lib/internal.h tests/unit/devices.h
	@mkdir -p $(@D)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_OBJ) $(LIBS)

fuzz: $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do \
		name=$${t#build-fuzz/}; corpus=tests/fuzz/corpus-$${name#fuzz_}; \
		mkdir -p $$corpus; \
		echo "fuzzing $$name for $(FUZZ_SECONDS)s"; \
		$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=0 $$corpus tests/fuzz/seeds/$${name#fuzz_} \
			|| exit 1; \
	done

$(BUILD)/bench/%: bench/%.c $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

BENCH_RUNS ?= 500

# top-cpu runs top in a pseudo-terminal (forkpty, in libutil).
$(BUILD)/bench/top-cpu: bench/top-cpu.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< -lutil

bench: all $(BUILD)/bench/startup $(BUILD)/bench/lease-contention $(BUILD)/bench/queue-throughput \
	$(BUILD)/bench/top-cpu $(MOCKS)
	$(BUILD)/bench/startup $(BENCH_RUNS) $(PROGRAM) tests/fixtures/eight.json
	$(BUILD)/bench/lease-contention $(abspath $(PROGRAM)) tests/fixtures/eight.json 64 8
	$(BUILD)/bench/queue-throughput $(abspath $(PROGRAM)) tests/fixtures/eight.json
	$(BUILD)/bench/top-cpu $(abspath $(PROGRAM)) tests/fixtures/eight.json $(abspath $(MOCK_DIR))
	if [ "$$(id -u)" -eq 0 ]; then bench/slurm-submit $(PROGRAM) 1000; \
	else echo "slurm-submit: skipped, it needs root to start the test Slurm"; fi

# made at each install: it names PREFIX and LIBDIR, which each install may change
$(BUILD)/visdev.pc: src/lib/visdev.pc.in include/visdev.h FORCE
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

install: all $(BUILD)/visdev.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DOCDIR)
	install -m 755 $(PROGRAM) $(DESTDIR)$(BINDIR)/visdev
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(LIBDIR)/libvisdev.a
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(LIBDIR)/libvisdev.so.0
	ln -sf libvisdev.so.0 $(DESTDIR)$(LIBDIR)/libvisdev.so
	install -m 644 include/visdev.h $(DESTDIR)$(INCLUDEDIR)/visdev.h
	install -m 644 $(BUILD)/visdev.pc $(DESTDIR)$(PKGCONFIGDIR)/visdev.pc
	install -m 644 docs/visdev.1 $(MANPAGES) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)
	install -D -m 644 completions/visdev.bash $(DESTDIR)$(BASHCOMPDIR)/visdev
	install -D -m 644 completions/_visdev $(DESTDIR)$(ZSHCOMPDIR)/_visdev
	install -D -m 644 completions/visdev.fish $(DESTDIR)$(FISHCOMPDIR)/visdev.fish
	@# where the shell or man would not look, say what to add (not for a package's DESTDIR)
	@if [ -z "$(DESTDIR)" ]; then \
		case ":$$PATH:" in *":$(BINDIR):"*) ;; \
		*) echo "# $(BINDIR) is not on PATH: export PATH=$(BINDIR):\$$PATH";; esac; \
		if ! { manpath 2>/dev/null || echo "$$MANPATH"; } | tr : '\n' | grep -qx "$(MANDIR)"; then \
		echo "# man does not look in $(MANDIR): export MANPATH=$(MANDIR):\$$MANPATH"; fi; \
	fi

# The Debian packages, built by debhelper (debian/) from a copy of the tracked
# tree in $(BUILD)/deb/, where they land: visdev, libvisdev0, libvisdev-dev,
# python3-visdev.
deb:
	rm -rf $(BUILD)/deb && mkdir -p $(BUILD)/deb/visdev-$(VERSION)
	git ls-files -z | xargs -0 cp --parents -t $(BUILD)/deb/visdev-$(VERSION)
	cd $(BUILD)/deb/visdev-$(VERSION) && dpkg-buildpackage -us -uc -b >../build.log 2>&1 || \
		{ tail -40 ../build.log; exit 1; }
	@ls $(BUILD)/deb/*.deb

# Removes exactly what install put in place (and the documentation's folder, once empty).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/visdev $(DESTDIR)$(LIBDIR)/libvisdev.a \
		$(DESTDIR)$(LIBDIR)/libvisdev.so.0 $(DESTDIR)$(LIBDIR)/libvisdev.so \
		$(DESTDIR)$(INCLUDEDIR)/visdev.h $(DESTDIR)$(PKGCONFIGDIR)/visdev.pc \
		$(DESTDIR)$(MANDIR)/man1/visdev.1 $(COMMANDS:%=$(DESTDIR)$(MANDIR)/man1/visdev-%.1) \
		$(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS))) \
		$(DESTDIR)$(BASHCOMPDIR)/visdev $(DESTDIR)$(ZSHCOMPDIR)/_visdev \
		$(DESTDIR)$(FISHCOMPDIR)/visdev.fish
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null

SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)

format:
	clang-format -i $(SOURCES)

format-check:
	clang-format --dry-run -Werror $(SOURCES)

clean:
	rm -rf build build-*
