# Makefile for llm: the engine (src/engine, a static library), bin/llm-cli,
# the engine tests (test/), and the PostgreSQL extension (PGXS, src/*.c).
#
#   make                 engine, llm-cli, tools, extension (when pg_config is found)
#   make check-engine    build and run the engine tests
#   make SANITIZE=1 ...  build everything with AddressSanitizer and UBSan

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
ENGINE_LIBS := -lpcre2-8 -lm -lpthread

TEST_SRCS := $(wildcard test/test_*.c)
TEST_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(TEST_SRCS))

ECFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -march=native -fPIC -pthread \
	-Wall -Wextra -Werror -Wno-unused-parameter -Wmissing-prototypes -Isrc/engine
ifeq ($(SANITIZE),1)
ECFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ELDFLAGS += -fsanitize=address,undefined
endif

all: engine-all

engine-all: $(ENGINE_LIB) $(BIN)/llm-cli $(BIN)/llm-random-model $(TEST_BINS)

$(BUILD)/%.o: %.c $(wildcard src/engine/*.h src/engine/cpu/*.h tools/*.h) | build-dirs
	$(CC) $(ECFLAGS) -c $< -o $@

$(ENGINE_LIB): $(ENGINE_OBJS)
	rm -f $@
	ar rcs $@ $^

CLI_OBJS := $(patsubst %.c,$(BUILD)/%.o,tools/llm-cli.c $(wildcard tools/cli_*.c))

$(BIN)/llm-cli: $(CLI_OBJS) $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS) $(ELDFLAGS) -o $@ $(CLI_OBJS) $(ENGINE_LIB) $(ENGINE_LIBS)

$(BIN)/llm-random-model: $(BUILD)/tools/llm-random-model.o $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS) $(ELDFLAGS) -o $@ $< $(ENGINE_LIB) $(ENGINE_LIBS)

$(BUILD)/test/%: test/%.c test/test.h $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS) $(ELDFLAGS) -Itest -o $@ $< $(ENGINE_LIB) $(ENGINE_LIBS)

# kernel micro-benchmarks (bench/bench_kernels.c)
$(BUILD)/bench_kernels: bench/bench_kernels.c $(ENGINE_LIB) | build-dirs
	$(CC) $(ECFLAGS) $(ELDFLAGS) -o $@ $< $(ENGINE_LIB) $(ENGINE_LIBS)

build-dirs:
	@mkdir -p $(BIN) $(BUILD)/src/engine/cpu $(BUILD)/tools $(BUILD)/test

check-engine: engine-all
	$(MAKE) SANITIZE=1 engine-all
	test/run_engine_tests.sh

clean-engine:
	rm -rf build build-asan bin

.PHONY: all engine-all build-dirs check-engine clean-engine

# ---- PostgreSQL extension (PGXS) ----
PG_SRCS := $(wildcard src/*.c)
ifneq ($(PG_SRCS),)
ifneq ($(shell command -v $(PG_CONFIG) 2>/dev/null),)
MODULE_big = llm
EXTENSION = llm
DATA = llm--1.0.sql
OBJS = $(PG_SRCS:.c=.o)
PG_CPPFLAGS = -Isrc/engine
PG_CFLAGS = -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers -Werror
SHLIB_LINK = $(ENGINE_LIB) $(ENGINE_LIBS)

# Tests: `make installcheck` after `make install` runs pg_regress on a
# temporary instance with the library preloaded, then the TAP tests (t/).
# The model comes from LLM_MODEL_DIR/LLM_MODEL; tools/pg-test.sh runs it all
# as an unprivileged user.
LLM_MODEL_DIR ?= $(abspath ../shared/models)
LLM_MODEL ?= stories260K.gguf
LLM_REGRESS_CONF = $(BUILD)/regress.conf
export LLM_MODEL_DIR LLM_MODEL
REGRESS = init generate batch errors stats
REGRESS_OPTS = --temp-config=$(LLM_REGRESS_CONF) --temp-instance=./tmp_check --encoding=UTF8 --no-locale
TAP_TESTS = 1
EXTRA_CLEAN = tmp_check results regression.diffs regression.out

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
$(shlib): $(ENGINE_LIB)
$(OBJS): src/llm.h $(wildcard src/engine/*.h)
clean: clean-engine

installcheck: $(LLM_REGRESS_CONF)
$(LLM_REGRESS_CONF): FORCE | build-dirs
	printf "%s\n" "shared_preload_libraries = 'llm'" \
		"llm.model_dir = '$(LLM_MODEL_DIR)'" "llm.model = '$(LLM_MODEL)'" > $@

# The main job: build, start a temporary server, summarize a sample table.
demo:
	bash tools/demo.sh

.PHONY: demo FORCE
endif
endif
