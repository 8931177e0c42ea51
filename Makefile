# SPDX-License-Identifier: MIT
# shmtrace: `make` builds, `make test` tests, `make demo` shows, `make bench` measures.
VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
CC        ?= cc
CFLAGS    ?= -O2 -g
BUILD     ?= build
# The Python binding is built and tested with Debian's interpreter, whose
# headers python3-dev installs; a python3 earlier on PATH (pyenv) may have none.
PYTHON    ?= /usr/bin/python3

override CFLAGS += -std=gnu11 -Wall -Wextra -Werror -fPIC -pthread -D_GNU_SOURCE \
	-DSHMTRACE_VERSION='"$(VERSION)"'
LDLIBS    := -luring -lmsgpackc -lz -lpthread -lm

# SAN=1: AddressSanitizer + UndefinedBehaviorSanitizer; TSAN=1: ThreadSanitizer.
ifeq ($(SAN),1)
override CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1
override LDFLAGS += -fsanitize=address,undefined
BUILD := build-san
endif
ifeq ($(TSAN),1)
override CFLAGS += -fsanitize=thread -O1
override LDFLAGS += -fsanitize=thread
BUILD := build-tsan
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Every goal that compiles checks its libraries first and, when one is
# missing, stops with one line naming the packages (tests/check-deps.sh).
# The goals that run `make deps` themselves check in their sub-make.
PKG_CONFIG ?= pkg-config
NOCHECK_GOALS := deps clean demo test bench fuzz build-all check-layers
TEST_GOALS := tests-bin test-san test-tsan $(BUILD)/tests/%
ifneq ($(filter-out $(NOCHECK_GOALS),$(or $(MAKECMDGOALS),all)),)
DEPS_MISSING := $(shell PKG_CONFIG='$(PKG_CONFIG)' CC='$(CC)' sh tests/check-deps.sh \
	$(if $(filter $(TEST_GOALS),$(MAKECMDGOALS)),--tests))
ifneq ($(DEPS_MISSING),)
$(error $(DEPS_MISSING))
endif
endif

# The layers (docs/DESIGN.md): util <- ring <- {lib, capture} <- {collector, cli}.
# In libshm/ring the tools see ring_view.h and ring_reader.h only (check-layers).
# Each folder compiles with the include paths of its own layer and those
# below it only, so an upward or sideways #include does not compile;
# tests/check-layers.sh (`make check-layers`) checks the same from the text.
INC_util      := -Iutil
INC_ring      := -Iinclude $(INC_util) -Ilibshm/ring
INC_lib       := $(INC_ring) -Ilibshm/lib
INC_capture   := $(INC_ring) -Icapture
INC_collector := $(INC_capture) -Icollector
# tools/ (the shell) over tools/trace/ (the only one that reads rings and
# captures); the formats (tools/chrome, otlp, svg, perfetto) see trace and the shell's
# headers, never each other nor capture/
INC_trace     := $(INC_capture) -Itools/trace
INC_cli       := $(INC_trace) -Itools
INC_format    := $(INC_ring) -Itools/trace -Itools
INC_demo      := -Iinclude
TOOLS_DIRS    := tools tools/trace tools/chrome tools/otlp tools/svg tools/perfetto
INC_tests     := $(INC_lib) -Icapture -Icollector $(TOOLS_DIRS:%=-I%) -Itests

UTIL_SRC  := $(wildcard util/*.c)
RING_SRC  := $(wildcard libshm/ring/*.c)
LIB_SRC   := $(wildcard libshm/lib/*.c)
CAP_SRC   := $(wildcard capture/*.c)
COL_SRC   := $(filter-out collector/main.c,$(wildcard collector/*.c))
CLI_SRC   := $(filter-out tools/main.c,$(wildcard $(TOOLS_DIRS:%=%/*.c)))
DEMO_SRC  := $(wildcard tools/demo/*.c)
TEST_SRC  := $(wildcard tests/test_*.c)
# each tests/bench/*.c is a program, but the files of cases linked into
# bench_shmtrace (tests/bench/bench_shmtrace.h declares what they share)
BENCH_CASES := tests/bench/bench_tail.c
BENCH_SRC := $(filter-out $(BENCH_CASES),$(wildcard tests/bench/*.c))

obj        = $(1:%.c=$(BUILD)/%.o)
UTIL_OBJ  := $(call obj,$(UTIL_SRC))
RING_OBJ  := $(call obj,$(RING_SRC))
LIB_OBJ   := $(call obj,$(LIB_SRC))
CAP_OBJ   := $(call obj,$(CAP_SRC))
COL_OBJ   := $(call obj,$(COL_SRC))
CLI_OBJ   := $(call obj,$(CLI_SRC))
DEMO_OBJ  := $(call obj,$(DEMO_SRC))
TESTS     := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCHES   := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

# one static archive per layer; libshmtrace.a/.so (what users link) are
# the ring and lib layers
A_UTIL    := $(BUILD)/libshmt-util.a
A_RING    := $(BUILD)/libshmt-ring.a
A_LIB     := $(BUILD)/libshmt-lib.a
A_CAP     := $(BUILD)/libshmt-capture.a
A_COL     := $(BUILD)/libshmt-collector.a
A_CLI     := $(BUILD)/libshmt-cli.a
STATIC    := $(BUILD)/libshmtrace.a
SHARED    := $(BUILD)/libshmtrace.so.0
# link order: a layer before the layers it uses
INTERNAL  := $(A_CLI) $(A_COL) $(A_CAP) $(A_LIB) $(A_RING) $(A_UTIL)
COLLECTOR := $(BUILD)/shmtrace-collector
TOOL      := $(BUILD)/shmtrace
DEMO      := $(BUILD)/shmtrace-demo

all: $(STATIC) $(SHARED) $(BUILD)/shmtrace.pc $(COLLECTOR) $(TOOL) $(DEMO)

$(BUILD)/util/%.o:         INC := $(INC_util)
$(BUILD)/libshm/ring/%.o:  INC := $(INC_ring)
$(BUILD)/libshm/lib/%.o:   INC := $(INC_lib)
$(BUILD)/capture/%.o:      INC := $(INC_capture)
$(BUILD)/collector/%.o:    INC := $(INC_collector)
$(BUILD)/tools/%.o:        INC := $(INC_cli)
$(BUILD)/tools/trace/%.o:  INC := $(INC_trace)
$(BUILD)/tools/chrome/%.o: INC := $(INC_format) -Itools/chrome
$(BUILD)/tools/otlp/%.o:   INC := $(INC_format) -Itools/otlp
$(BUILD)/tools/svg/%.o:    INC := $(INC_format) -Itools/svg
$(BUILD)/tools/perfetto/%.o: INC := $(INC_format) -Itools/perfetto
$(BUILD)/tools/demo/%.o:   INC := $(INC_demo)
$(BUILD)/tests/bench/%.o:  INC := $(INC_tests)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(INC) -MMD -MP -fvisibility=hidden -c -o $@ $<

-include $(wildcard $(BUILD)/*/*.d $(BUILD)/*/*/*.d $(BUILD)/tests/*.d $(BUILD)/bench/*.d)

define archive
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^
endef
$(A_UTIL): $(UTIL_OBJ) ; $(archive)
$(A_RING): $(RING_OBJ) ; $(archive)
$(A_LIB):  $(LIB_OBJ)  ; $(archive)
$(A_CAP):  $(CAP_OBJ)  ; $(archive)
$(A_COL):  $(COL_OBJ)  ; $(archive)
$(A_CLI):  $(CLI_OBJ)  ; $(archive)
$(STATIC): $(RING_OBJ) $(LIB_OBJ) ; $(archive)

$(SHARED): $(RING_OBJ) $(LIB_OBJ) libshm/libshmtrace.map
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libshmtrace.so.0 \
		-Wl,--version-script=libshm/libshmtrace.map -o $@ $(RING_OBJ) $(LIB_OBJ) -lpthread
	$(Q)ln -sf libshmtrace.so.0 $(BUILD)/libshmtrace.so

$(BUILD)/shmtrace.pc: libshm/shmtrace.pc.in
	@mkdir -p $(BUILD)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

$(COLLECTOR): $(BUILD)/collector/main.o $(A_COL) $(A_CAP) $(A_LIB) $(A_RING) $(A_UTIL)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TOOL): $(BUILD)/tools/main.o $(A_CLI) $(A_CAP) $(A_LIB) $(A_RING) $(A_UTIL)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(DEMO): $(DEMO_OBJ) $(STATIC)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# A test that steps in between a library function and its callers: ld
# --wrap=FUNC sends their calls to the test's __wrap_FUNC, which calls
# __real_FUNC (LDWRAP_<test>, the test's name without tests/ and .c).
LDWRAP_test_snapshot_interleave := -Wl,--wrap=shmt_ring_block_settled

$(BUILD)/tests/%: tests/%.c $(INTERNAL)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(INC_tests) -MMD -MP -MF $@.d $(LDFLAGS) $(LDWRAP_$*) -o $@ $< $(INTERNAL) \
		$(LDLIBS) -lcmocka

$(BUILD)/bench/bench_shmtrace: $(call obj,$(BENCH_CASES))
$(BUILD)/bench/%: tests/bench/%.c $(INTERNAL)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(INC_tests) -MMD -MP -MF $@.d $(LDFLAGS) -o $@ $< $(filter %.o,$^) $(INTERNAL) $(LDLIBS)

# Fails on an #include of a header from a layer above or beside the file's.
check-layers:
	$(Q)bash tests/check-layers.sh

# Fails when files of libshm/ call each other (nm of each object, tsort).
check-calls: $(RING_OBJ) $(LIB_OBJ)
	$(Q)bash tests/check-calls.sh $(BUILD)

# The producers of the OTLP end-to-end tests (tests/e2e/otlp.sh, otlp_tree.sh).
$(BUILD)/tests/otlp-%: tests/otlp/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(INC_demo) $(LDFLAGS) -o $@ $< $(STATIC) -lpthread

# The Python extension (python/), built in place for the tests and the demo;
# setup.py compiles libshm/ring/*.c and libshm/lib/*.c (with INC_lib) into
# it, its own sources with -Iinclude only; and the C process of its tests.
PY_INC    := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_EXT    := python/shmtrace/_shmtrace$(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null || echo .so)
python: $(PY_EXT) $(BUILD)/tests/py-c-hop

$(PY_EXT): $(wildcard python/shmtrace/*.c python/shmtrace/*.h) python/setup.py $(RING_SRC) $(LIB_SRC) \
		$(wildcard include/*.h libshm/*/*.h)
	@$(if $(Q),echo "  PY      $@")
	$(Q)cd python && SHMTRACE_WERROR=1 $(PYTHON) setup.py -q build_ext --inplace >/dev/null

$(BUILD)/tests/py-c-hop: tests/python/c_hop.c $(STATIC)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(INC_demo) $(LDFLAGS) -o $@ $< $(STATIC) -lpthread

# Debian packages the build and the tests need; installed when root.
DEB_PKGS := liburing-dev libmsgpack-dev libcmocka-dev pkg-config valgrind clang libclang-rt-14-dev \
	python3-dev python3-setuptools python3-wheel python3-venv protobuf-compiler zlib1g-dev
deps:
	@bash tests/deps.sh $(DEB_PKGS)

build-all: deps all $(TESTS)

test: deps
	$(Q)$(MAKE) --no-print-directory all tests-bin python
	$(Q)BUILD=$(BUILD) PYTHON=$(PYTHON) bash tests/run.sh

tests-bin: $(TESTS) $(BUILD)/tests/otlp-hop $(BUILD)/tests/otlp-prefork

test-san:
	$(Q)$(MAKE) --no-print-directory SAN=1 all tests-bin
	$(Q)BUILD=build-san SHMTRACE_SAN=1 bash tests/run.sh

test-tsan:
	$(Q)$(MAKE) --no-print-directory TSAN=1 CC=clang all tests-bin
	$(Q)BUILD=build-tsan SHMTRACE_SAN=1 bash tests/run.sh --threaded

demo: deps all python
	$(Q)BUILD=$(BUILD) PYTHON=$(PYTHON) bash tools/demo/demo.sh

# a clean optimised build each time: figures of exactly the tree as it is
bench: deps
	$(Q)rm -rf build-bench
	$(Q)$(MAKE) --no-print-directory CFLAGS="-O2 -g -march=native" BUILD=build-bench all
	$(Q)$(MAKE) --no-print-directory CFLAGS="-O2 -g -march=native" BUILD=build-bench benches
	$(Q)$(MAKE) --no-print-directory $(PY_EXT)
	$(Q)BUILD=build-bench PYTHON=$(PYTHON) bash tests/bench/run.sh

benches: $(BENCHES)

# libFuzzer harnesses (clang + libclang-rt-14-dev); FUZZ_SECONDS per harness, default 60
fuzz: deps all
	$(Q)bash tests/deps.sh clang libclang-rt-14-dev
	$(Q)BUILD=$(BUILD) bash tests/fuzz/run.sh

# Static analysis: cppcheck and clang-tidy (the analyzer and bugprone checks
# minus those that flag this code's deliberate idioms), both must be clean.
# Of the analyzer's va_list checks, Uninitialized and Unterminated are off:
# in one of six runs on 2026-12-05, on code none of them changed,
# valist.Unterminated reported a va_list "initialized" in msgpack's
# msgpack_pack_bin_with_body(), which has none.
TIDY_CHECKS := -*,clang-analyzer-*,bugprone-*,-clang-analyzer-valist.Uninitialized,\
	-clang-analyzer-valist.Unterminated,\
	-clang-analyzer-security.insecureAPI.DeprecatedOrUnsafeBufferHandling,\
	-bugprone-easily-swappable-parameters,-bugprone-narrowing-conversions,\
	-bugprone-reserved-identifier,-bugprone-macro-parentheses,\
	-bugprone-assignment-in-if-condition,-bugprone-sizeof-expression,\
	-bugprone-implicit-widening-of-multiplication-result,\
	-bugprone-misplaced-widening-cast,-bugprone-suspicious-string-compare
TIDY_SRC := $(UTIL_SRC) $(RING_SRC) $(LIB_SRC) $(CAP_SRC) $(wildcard collector/*.c) \
	$(wildcard $(TOOLS_DIRS:%=%/*.c))
TIDY_1 := $(wordlist 1,$(shell echo $$(( $(words $(TIDY_SRC)) / 2 ))),$(TIDY_SRC))
TIDY_2 := $(filter-out $(TIDY_1),$(TIDY_SRC))
TIDY_FLAGS := -quiet --warnings-as-errors='*' -checks='$(TIDY_CHECKS)'
# clang-tidy on each half of the sources and on the demo's, two at once
# (one process a half: a process a file took a fifth more CPU)
lint:
	@bash tests/deps.sh cppcheck clang-tidy python3-dev
	cppcheck --quiet -j 2 --enable=warning,performance,portability --std=c11 -D_GNU_SOURCE \
		$(INC_tests) --inline-suppr --error-exitcode=1 util libshm capture collector tools
	$(Q)$(MAKE) --no-print-directory -j2 -Otarget tidy-1 tidy-2 tidy-demo
tidy-1 tidy-2:
	clang-tidy $(TIDY_FLAGS) $(TIDY_$(subst tidy-,,$@)) -- \
		-std=gnu11 -D_GNU_SOURCE $(INC_tests) -DSHMTRACE_VERSION='"lint"'
tidy-demo:
	clang-tidy $(TIDY_FLAGS) $(wildcard tools/demo/*.c python/shmtrace/*.c) -- \
		-std=gnu11 -D_GNU_SOURCE $(INC_demo) -Itools/demo -Ipython/shmtrace -I$(PY_INC) \
		-DSHMTRACE_VERSION='"lint"'

# man 3 NAME for every function shmtrace.3's NAME section names: a page of
# one line, ".so man3/shmtrace.3" (evaluated by install only)
MAN3_LINKS = $(shell sed -n '/^\.SH NAME/,/\\-/p' docs/man/shmtrace.3 | \
	sed -e '1d' -e 's/\\-.*//' | tr ',' ' ')

install: $(STATIC) $(SHARED) $(BUILD)/shmtrace.pc $(COLLECTOR) $(TOOL)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 0644 include/shmtrace.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libshmtrace.so.0 $(DESTDIR)$(PREFIX)/lib/libshmtrace.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' libshm/shmtrace.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/shmtrace.pc
	install -m 0755 $(COLLECTOR) $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	for m in docs/man/*.1; do [ -f "$$m" ] && install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man1/; done; true
	for m in docs/man/*.3; do [ -f "$$m" ] && install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man3/; done; true
	for n in $(filter-out shmtrace,$(MAN3_LINKS)); do \
		echo '.so man3/shmtrace.3' > $(DESTDIR)$(PREFIX)/share/man/man3/$$n.3 && \
		chmod 0644 $(DESTDIR)$(PREFIX)/share/man/man3/$$n.3 || exit 1; done
ifeq ($(DESTDIR),)
	@# into the system: refresh the loader's cache, or programs do not find
	@# libshmtrace.so.0; say so when PREFIX/lib is not a directory it searches
	@if [ "$$(id -u)" -eq 0 ]; then ldconfig; else echo "shmtrace: not root: run 'sudo ldconfig'" >&2; fi
	@ldconfig -p 2>/dev/null | grep -q ' => $(PREFIX)/lib/libshmtrace.so.0$$' || \
		echo "shmtrace: $(PREFIX)/lib is not searched by the dynamic loader: add it to" \
		"/etc/ld.so.conf.d/ and run ldconfig, or set LD_LIBRARY_PATH=$(PREFIX)/lib" >&2
endif

clean:
	rm -rf build build-san build-tsan build-bench build-clang build-fuzz demo-out demo-trace.json
	rm -rf python/build python/*.egg-info python/shmtrace/_shmtrace*.so python/shmtrace/__pycache__ \
		tests/python/__pycache__

.PHONY: tidy-1 tidy-2 tidy-demo check-layers check-calls python fuzz lint all deps test tests-bin test-san test-tsan demo bench benches install clean build-all
.SECONDARY:
