# Makefile for llm: the PostgreSQL extension (PGXS, src/*.c) over the engine
# (src/engine, a static library), the CUDA backend as a module of its own,
# bin/llm-cli, and the engine tests (test/).
#
#   make                 the extension: llm.so, and llm_cuda.so where nvcc is found
#   make install         llm.so, llm_cuda.so, llm.control and the SQL scripts
#   make installcheck    pg_regress and the TAP tests (t/) on a temporary server
#   make tools           bin/llm-cli and bin/llm-random-model
#   make check-engine    build and run the engine tests (plain and under ASan)
#   make check-cassert   the PostgreSQL tests against a server built with assertions
#   make SANITIZE=1 ...  build everything with AddressSanitizer and UBSan
#   make WITH_CUDA=0|1   without / with the CUDA backend (default: with, when nvcc is found)
#   make gpu-check       build, test and benchmark the CUDA backend on a GPU
#   make cuda-mutations  plant bugs in copies of cuda/ files: the emulator's tests must fail
#   make fuzz            build the libFuzzer targets (test/fuzz) with clang and run
#                        each for FUZZ_SECONDS (default 60); fails on any finding
#   make PG_CONFIG=...   against another PostgreSQL (15 to 18): its objects are
#                        rebuilt when pg_config names another server
#
# Every object depends on the headers it includes (-MMD), found in the .d
# file beside it.

PG_CONFIG ?= pg_config

ifeq ($(SANITIZE),1)
BUILD := build-asan
BIN := build-asan/bin
else
BUILD := build
BIN := bin
endif
ENGINE_SRCS := $(wildcard src/engine/*.c src/engine/cpu/*.c)
ENGINE_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(ENGINE_SRCS))
ENGINE_LIB := $(BUILD)/libllmengine.a
ENGINE_LIBS := -lpcre2-8 -lm -lpthread -ldl
# what a program links for the engine (never CUDA: cuda_module.c loads it)
LINK_ENGINE = $(ENGINE_LIB) $(ENGINE_LIBS)

TEST_SRCS := $(wildcard test/test_*.c)
TEST_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(TEST_SRCS))

# Portable by default: the SIMD kernels carry their own target attributes
# and run only where cpu_features.c finds their level, so llm.so built on
# one x86-64 runs on any other.  OPTFLAGS=-march=native opts in to tuning
# the generic code (and the scalar reference) for the building machine.
OPTFLAGS ?=
ECFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g $(OPTFLAGS) -fPIC -pthread \
	-Wall -Wextra -Werror -Wno-unused-parameter -Wmissing-prototypes -Isrc/engine -MMD -MP
ifeq ($(SANITIZE),1)
ECFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ELDFLAGS += -fsanitize=address,undefined
endif
# for a program compiled and linked in one command, which keeps no .d file
ECFLAGS_NODEP = $(filter-out -MMD -MP,$(ECFLAGS))

# the extension (PGXS's all, below) and the CUDA module
all: cuda-module

tools: $(BIN)/llm-cli $(BIN)/llm-random-model

engine-all: $(ENGINE_LIB) tools $(TEST_BINS) cuda-all cuda-emu

# an object without its .d file (built before -MMD) is built again
$(BUILD)/%.o: %.c $(BUILD)/%.d | build-dirs
	$(CC) $(ECFLAGS) -c $< -o $@
$(BUILD)/%.d: ;
.PRECIOUS: $(BUILD)/%.d

-include $(wildcard $(BUILD)/src/engine/*.d $(BUILD)/src/engine/cpu/*.d $(BUILD)/tools/*.d $(BUILD)/cuda/*.d \
	$(BUILD)/cuda-emu/*.d build/fuzz/src/engine/*.d build/fuzz/src/engine/cpu/*.d)

$(ENGINE_LIB): $(ENGINE_OBJS)
	rm -f $@
	ar rcs $@ $^

CLI_OBJS := $(patsubst %.c,$(BUILD)/%.o,tools/llm-cli.c $(wildcard tools/cli_*.c))

$(BIN)/llm-cli: $(CLI_OBJS) $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS) $(ELDFLAGS) -o $@ $(CLI_OBJS) $(LINK_ENGINE)

$(BIN)/llm-random-model: $(BUILD)/tools/llm-random-model.o $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS) $(ELDFLAGS) -o $@ $< $(LINK_ENGINE)

# (compiled and linked in one: they depend on test/*.h and, through the
# library, on the engine's headers)
$(BUILD)/test/%: test/%.c $(wildcard test/*.h) $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS_NODEP) $(ELDFLAGS) -Itest -o $@ $< $(LINK_ENGINE)

# kernel micro-benchmarks (bench/bench_kernels.c)
$(BUILD)/bench_kernels: bench/bench_kernels.c $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS_NODEP) $(ELDFLAGS) -o $@ $< $(LINK_ENGINE)

# attention in the shape of batched decode (bench/bench_attention.c)
$(BUILD)/bench_attention: bench/bench_attention.c $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS_NODEP) $(ELDFLAGS) -o $@ $< $(LINK_ENGINE)

# constrained decoding against plain decoding (bench/bench_constrained.c)
$(BUILD)/bench_constrained: bench/bench_constrained.c $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS_NODEP) $(ELDFLAGS) -o $@ $< $(LINK_ENGINE)

build-dirs:
	@mkdir -p $(BIN) $(BUILD)/src/engine/cpu $(BUILD)/tools $(BUILD)/test

# ---- CUDA backend (cuda/) ----------------------------------------------------
# Built when nvcc is found (PATH, else $(CUDA_HOME)/bin); WITH_CUDA=1 insists,
# WITH_CUDA=0 leaves it out; never in the SANITIZE=1 build.  Kernels for
# sm_90 (H100/H200), sm_80 (A100) and sm_75 (T4), plus sm_90 PTX for newer
# GPUs; warnings are errors.
#
# The backend is a module of its own, llm_cuda.so (installed beside
# llm.so), that the engine loads at run time (src/engine/cuda_module.c):
# llm.so and llm-cli never link CUDA, so they load where cuBLAS or a driver
# is missing and compute on the CPU.  The module holds the CUDA objects,
# the few engine objects they call (its own copies), the CUDA runtime
# (static) and cuBLAS (found through an rpath), and exports one symbol,
# llm_cuda_module_entry.  Its test and benchmark programs link the objects
# (libllmcuda.a) directly.
#
# The same kernels also build for the CPU emulator (cuda/emu): g++ compiles
# the .cu files against emu.h, and $(EMU_BUILD)/test_cuda runs the whole
# CUDA test program on the CPU under AddressSanitizer (needs only the CUDA
# headers).  `make gpu-check` builds, tests and benchmarks on a real GPU.
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard $(CUDA_HOME)/bin/nvcc))
WITH_CUDA ?= $(if $(NVCC),1,0)
ifeq ($(SANITIZE),1)
override WITH_CUDA := 0
endif
CUDA_GENCODE := -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
	-gencode arch=compute_75,code=sm_75 -gencode arch=compute_90,code=compute_90
NVCCFLAGS := -std=c++17 -O3 $(CUDA_GENCODE) -Werror all-warnings \
	-Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-parameter,-fPIC -Icuda -Isrc/engine -MMD -MP
CUDA_CFLAGS := $(ECFLAGS) -I$(CUDA_HOME)/include -Icuda
CUDA_KERNELS := $(wildcard cuda/*.cu)
CUDA_HOST_SRCS := $(filter-out cuda/test_cuda.c cuda/bench_cuda.c,$(wildcard cuda/*.c))
CUDA_LIB := $(BUILD)/libllmcuda.a
CUDA_MODULE := llm_cuda.so
# what links the CUDA objects: the runtime (static), cuBLAS, C++'s runtime
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++

ifeq ($(WITH_CUDA),1)
ifeq ($(NVCC),)
$(error WITH_CUDA=1 but nvcc is not on PATH nor in $(CUDA_HOME)/bin)
endif
CUDA_OBJS := $(patsubst cuda/%.cu,$(BUILD)/cuda/%.cu.o,$(CUDA_KERNELS)) \
	$(patsubst cuda/%.c,$(BUILD)/cuda/%.o,$(CUDA_HOST_SRCS))

$(BUILD)/cuda/%.cu.o: cuda/%.cu | build-dirs
	@mkdir -p $(BUILD)/cuda
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/cuda/%.o: cuda/%.c | build-dirs
	@mkdir -p $(BUILD)/cuda
	$(CC) $(CUDA_CFLAGS) -c $< -o $@

$(CUDA_LIB): $(CUDA_OBJS)
	rm -f $@
	ar rcs $@ $^

# -z defs: nothing left for the loading program to supply; the version
# script keeps every symbol but the entry table local
$(CUDA_MODULE): $(CUDA_LIB) $(ENGINE_LIB) cuda/module.map
	$(CC) -shared -o $@ -Wl,-z,defs -Wl,--version-script=cuda/module.map \
		-Wl,--whole-archive $(CUDA_LIB) -Wl,--no-whole-archive $(ENGINE_LIB) $(CUDA_LIBS) $(ENGINE_LIBS)

$(BUILD)/cuda/test_cuda: $(BUILD)/cuda/test_cuda.o $(CUDA_LIB) $(ENGINE_LIB)
	$(CC) $(ECFLAGS) -o $@ $< $(CUDA_LIB) $(LINK_ENGINE) $(CUDA_LIBS)

$(BIN)/llm-gpu-bench: $(BUILD)/cuda/bench_cuda.o $(CUDA_LIB) $(ENGINE_LIB)
	$(CC) $(ECFLAGS) -o $@ $< $(CUDA_LIB) $(LINK_ENGINE) $(CUDA_LIBS)

$(BUILD)/cuda/test_cuda.o $(BUILD)/cuda/bench_cuda.o: CUDA_CFLAGS += -Itest

cuda-all: $(BUILD)/cuda/test_cuda $(BIN)/llm-gpu-bench $(CUDA_MODULE)
cuda-module: $(CUDA_MODULE)
else
cuda-all:
cuda-module:
endif

# the emulator build: plain g++, ASan and UBSan, the engine library as it is
EMU_BUILD := build/cuda-emu
EMU_SAN := -fsanitize=address,undefined -fno-omit-frame-pointer
EMU_CXXFLAGS := -std=c++17 -O1 -g -DLLM_CUDA_EMU -I$(CUDA_HOME)/include -Icuda -Isrc/engine \
	-Wall -Wextra -Werror -Wno-unused-parameter -Wno-unknown-pragmas $(EMU_SAN) -MMD -MP
EMU_CFLAGS := $(filter-out -O2,$(ECFLAGS)) -O1 -I$(CUDA_HOME)/include -Icuda -Itest $(EMU_SAN)
EMU_OBJS := $(patsubst cuda/%.cu,$(EMU_BUILD)/%.cu.o,$(CUDA_KERNELS)) \
	$(patsubst cuda/%.c,$(EMU_BUILD)/%.o,$(CUDA_HOST_SRCS)) $(EMU_BUILD)/emu.o
HAVE_CUDA_HEADERS := $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h)

$(EMU_BUILD)/%.cu.o: cuda/%.cu
	@mkdir -p $(EMU_BUILD)
	$(CXX) -x c++ $(EMU_CXXFLAGS) -c $< -o $@

$(EMU_BUILD)/%.o: cuda/%.c
	@mkdir -p $(EMU_BUILD)
	$(CC) $(EMU_CFLAGS) -c $< -o $@

$(EMU_BUILD)/emu.o: cuda/emu/emu.cpp
	@mkdir -p $(EMU_BUILD)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

$(EMU_BUILD)/test_cuda: $(EMU_BUILD)/test_cuda.o $(EMU_OBJS) $(ENGINE_LIB)
	$(CXX) $(EMU_SAN) -o $@ $(EMU_BUILD)/test_cuda.o $(EMU_OBJS) $(LINK_ENGINE)

$(EMU_BUILD)/bench_cuda: $(EMU_BUILD)/bench_cuda.o $(EMU_OBJS) $(ENGINE_LIB)
	$(CXX) $(EMU_SAN) -o $@ $(EMU_BUILD)/bench_cuda.o $(EMU_OBJS) $(LINK_ENGINE)

# A mutant of the emulator's test program (test/cuda_mutations.sh): the
# copy MUTANT_DIR/x of one file cuda/x, changed, compiled there, and linked
# with every other object of the emulator build as it is, so that a mutant
# costs one compilation:
#   make MUTANT_DIR=build/mutants/m MUTANT_FILE=attention.cu build/mutants/m/test_cuda
ifneq ($(MUTANT_DIR)$(MUTANT_FILE),)
MUTANT_OBJ := $(patsubst %.cu,%.cu.o,$(patsubst %.c,%.o,$(MUTANT_FILE)))

# the copy is the script's, never made from its object by make's built-in rules
$(MUTANT_DIR)/$(MUTANT_FILE): ;

$(MUTANT_DIR)/%.cu.o: $(MUTANT_DIR)/%.cu
	$(CXX) -x c++ $(EMU_CXXFLAGS) -c $< -o $@

$(MUTANT_DIR)/%.o: $(MUTANT_DIR)/%.c
	$(CC) $(EMU_CFLAGS) -c $< -o $@

$(MUTANT_DIR)/test_cuda: $(MUTANT_DIR)/$(MUTANT_OBJ) $(EMU_BUILD)/test_cuda.o $(EMU_OBJS) $(ENGINE_LIB)
	$(CXX) $(EMU_SAN) -o $@ $(EMU_BUILD)/test_cuda.o $(filter-out $(EMU_BUILD)/$(MUTANT_OBJ),$(EMU_OBJS)) \
		$(MUTANT_DIR)/$(MUTANT_OBJ) $(LINK_ENGINE)
endif

ifeq ($(WITH_CUDA)$(if $(HAVE_CUDA_HEADERS),y,n),1y)
cuda-emu: $(EMU_BUILD)/test_cuda $(EMU_BUILD)/bench_cuda
else
cuda-emu:
endif

# build everything here, then test and benchmark on the GPU (tools/gpu-check.sh)
gpu-check:
	bash tools/gpu-check.sh

# every mutation of test/cuda_mutations.sh, each caught by the emulator's tests (about 6 minutes)
cuda-mutations:
	bash test/cuda_mutations.sh

.PHONY: cuda-all cuda-module cuda-emu gpu-check cuda-mutations
# ---- end of the CUDA backend -------------------------------------------------

# ---- fuzzing (test/fuzz) -----------------------------------------------------
# The engine again, compiled by clang with libFuzzer's coverage hooks,
# AddressSanitizer and UBSan (every UBSan report fatal), into build/fuzz;
# one program per test/fuzz/fuzz_*.c.  Never part of the default build.
# The SIMD kernels (cpu/*_avx*.c) are compiled plainly: clang takes more
# than 20 minutes over matmul_avx512.c under either sanitizer, and those
# kernels are checked under ASan by the gcc build (make SANITIZE=1).
# test/fuzz/run.sh builds these and runs each for FUZZ_SECONDS.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD := build/fuzz
FUZZ_WARN := -std=c11 -D_GNU_SOURCE -g -pthread -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wmissing-prototypes -Isrc/engine
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := $(FUZZ_WARN) -O1 $(FUZZ_SAN)
FUZZ_OBJ_CFLAGS = $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP
FUZZ_ENGINE_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(ENGINE_SRCS))
FUZZ_SIMD_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(wildcard src/engine/cpu/*_avx*.c))
FUZZ_ENGINE_LIB := $(FUZZ_BUILD)/libllmengine.a
FUZZ_TARGETS := $(patsubst test/fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard test/fuzz/fuzz_*.c))

$(FUZZ_SIMD_OBJS): FUZZ_OBJ_CFLAGS = $(FUZZ_WARN) -O2 -MMD -MP

$(FUZZ_BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -c $< -o $@

$(FUZZ_ENGINE_LIB): $(FUZZ_ENGINE_OBJS)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz.h $(FUZZ_ENGINE_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_ENGINE_LIB) $(ENGINE_LIBS)

# the random-model writer, for run.sh's seeds
$(FUZZ_BUILD)/llm-random-model: tools/llm-random-model.c $(wildcard tools/*.h) $(FUZZ_ENGINE_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_ENGINE_LIB) $(ENGINE_LIBS)

fuzz-build: $(FUZZ_TARGETS) $(FUZZ_BUILD)/llm-random-model

fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_CC=$(FUZZ_CC) bash test/fuzz/run.sh

.PHONY: fuzz fuzz-build
# ---- end of fuzzing ----------------------------------------------------------

check-engine: engine-all
	$(MAKE) SANITIZE=1 engine-all
	test/run_engine_tests.sh

# the PostgreSQL tests against a server built with assertions (slow: builds it once; tools/check-cassert.sh)
check-cassert:
	bash tools/check-cassert.sh

clean-engine:
	rm -rf build build-asan bin

.PHONY: all tools engine-all build-dirs check-engine check-cassert clean-engine

# ---- PostgreSQL extension (PGXS) ----
# PostgreSQL 15 to 18 from one source (src/pg_compat.h); the SQL is the 1.0
# script plus an upgrade script per release since, which CREATE EXTENSION
# runs in order, so a fresh install is an upgraded one.
PG_SRCS := $(wildcard src/*.c)
ifneq ($(shell command -v $(PG_CONFIG) 2>/dev/null),)
MODULE_big = llm
EXTENSION = llm
DATA = $(wildcard llm--*.sql)
OBJS = $(PG_SRCS:.c=.o)
# the library's version is the extension's (llm.control's default_version)
LLM_VERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" llm.control)
PG_CPPFLAGS = -Isrc/engine -DLLM_VERSION='"$(LLM_VERSION)"'
# -MMD in the C flags, not the preprocessor's: the LLVM bitcode of a server
# built with JIT is compiled with the same CPPFLAGS, and its src/x.d (naming
# src/x.bc) would replace the object's, which then missed header changes
PG_CFLAGS = -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers -Werror -MMD -MP
SHLIB_LINK = $(LINK_ENGINE)
# libpq, for the remote inference nodes (src/remote.c), as postgres_fdw and dblink link it
SHLIB_LINK_INTERNAL = $(libpq)
PG_CPPFLAGS += -I$(libpq_srcdir)

# Tests: `make installcheck` after `make install` runs pg_regress on a
# temporary instance with the library preloaded, then the TAP tests (t/).
# The model comes from LLM_MODEL_DIR/LLM_MODEL; tools/pg-test.sh runs it all
# as an unprivileged user.
LLM_MODEL_DIR ?= $(abspath ../shared/models)
LLM_MODEL ?= stories260K.gguf
LLM_REGRESS_CONF = $(BUILD)/regress.conf
export LLM_MODEL_DIR LLM_MODEL LLM_REAL_MODEL_DIR
REGRESS = init generate batch errors stats batch_scan semantic constrained
REGRESS_OPTS = --temp-config=$(LLM_REGRESS_CONF) --temp-instance=./tmp_check --encoding=UTF8 --no-locale
TAP_TESTS = 1
EXTRA_CLEAN = tmp_check results regression.diffs regression.out src/*.d $(CUDA_MODULE)

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# pg_config's CFLAGS are those of the compiler PostgreSQL was built with;
# drop the warning options this compiler does not know (a server built by
# a newer gcc passes -Wmissing-variable-declarations, which gcc 12 refuses)
PG_UNKNOWN_WARNINGS := $(shell for f in $(filter -W%,$(CFLAGS)); do \
	$(CC) -Wall -Werror $$f -fsyntax-only -x c /dev/null >/dev/null 2>&1 || echo $$f; done)
override CFLAGS := $(filter-out $(PG_UNKNOWN_WARNINGS),$(CFLAGS))

# the objects are rebuilt when pg_config names another server than last time
PG_STAMP := $(BUILD)/pg_config.stamp
PG_STAMP_TEXT := $(shell $(PG_CONFIG) --version) $(shell $(PG_CONFIG) --includedir-server)
ifneq ($(PG_STAMP_TEXT),$(shell cat $(PG_STAMP) 2>/dev/null))
$(shell mkdir -p $(BUILD) && echo '$(PG_STAMP_TEXT)' > $(PG_STAMP))
endif
$(OBJS): $(PG_STAMP)
src/llm.o: llm.control
# the bitcode is rebuilt with its object, which tracks the headers
$(PG_SRCS:.c=.bc): %.bc: %.o
-include $(wildcard src/*.d)

$(shlib): $(ENGINE_LIB)
clean: clean-engine

# the CUDA module goes beside llm.so, where the worker looks for it
ifeq ($(WITH_CUDA),1)
install: install-cuda-module
install-cuda-module: $(CUDA_MODULE) installdirs
	$(INSTALL_SHLIB) $(CUDA_MODULE) '$(DESTDIR)$(pkglibdir)/$(CUDA_MODULE)'
uninstall: uninstall-cuda-module
uninstall-cuda-module:
	rm -f '$(DESTDIR)$(pkglibdir)/$(CUDA_MODULE)'
.PHONY: install-cuda-module uninstall-cuda-module
endif

installcheck: $(LLM_REGRESS_CONF)
$(LLM_REGRESS_CONF): FORCE | build-dirs
	printf "%s\n" "shared_preload_libraries = 'llm'" \
		"llm.model_dir = '$(LLM_MODEL_DIR)'" "llm.model = '$(LLM_MODEL)'" "llm.cache_mb = 0" > $@

# The main job: build, start a temporary server, summarize a sample table.
demo:
	bash tools/demo.sh

.PHONY: demo FORCE
else
all:
	@echo "make: $(PG_CONFIG) not found: install PostgreSQL's server development files, or name it with PG_CONFIG=..." >&2
	@echo "      (make tools builds llm-cli alone)" >&2
	@false
endif
