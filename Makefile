# cachegate — see README.md. `make test` and `make run` install what they need first.
#
#   make deps      Debian packages, FAISS C API, test venv, default models (idempotent)
#   make           build/cachegate, and build/libcachegate_cuda.so when nvcc exists
#   make test      deps + build + C unit tests + test-cuda-emu + end-to-end tests;
#                  SAN=1: under ASan+UBSan (without test-cuda-emu)
#   make test-gpu  tests that need a GPU (fails without one)
#   make test-cuda-emu  the CUDA code's fast GPU tests on a CPU emulator of the GPU (no nvcc)
#   make bench     benchmarks (CPU, peers side by side)
#   make bench-gpu the GPU tests, then GPU timings in one table (fails without a GPU)
#   make run       deps + build + serve on the defaults
#   make fmt       clang-format every C/CUDA source
#   make clean     remove build outputs (models and the venv stay)

SHELL := /bin/bash
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

ifeq ($(SAN),1)
BUILD := build/san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT := -O1
else
BUILD := build
SANFLAGS :=
OPT := -O2
endif

# snprintf truncation of messages into fixed buffers is deliberate, hence -Wno-format-truncation
CFLAGS := -std=c11 -D_GNU_SOURCE -Iembedder -Iengine -Istore $(OPT) -g -Wall -Wextra -Werror -Wno-format-truncation -MMD -MP $(SANFLAGS)
LDFLAGS := $(SANFLAGS)
# OpenBLAS's OpenMP build, so that BLAS and the embedder's own parallel loops share one
# thread pool (rpath: the default libopenblas.so.0 may be the pthreads build)
# (Debian's multiarch directories: x86_64-linux-gnu, aarch64-linux-gnu, ...)
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
OPENBLAS_DIR := /usr/lib/$(MULTIARCH)/openblas-openmp
BLAS_CFLAGS := -I/usr/include/$(MULTIARCH)/openblas-openmp -fopenmp
BLAS_LIBS := -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -fopenmp
# the FAISS C API (built by make deps) over Debian's libfaiss
FAISS_LIBS := build/libfaiss_c.a -lfaiss -lstdc++
GW_LIBS := -levent_openssl -levent_pthreads -levent -lssl -lcrypto -ljansson -linih \
           -lsqlite3 $(FAISS_LIBS) $(BLAS_LIBS) -lutf8proc -lxxhash -lpthread -ldl -lm

EMB_SRC := $(wildcard embedder/*.c)
EMB_OBJ := $(EMB_SRC:%.c=$(BUILD)/obj/%.o)
EMB_LIB := $(BUILD)/libembedder.a
ENG_SRC := $(wildcard engine/*.c)
ENG_OBJ := $(ENG_SRC:%.c=$(BUILD)/obj/%.o)
ENG_LIB := $(BUILD)/libengine.a

STORE_SRC := $(wildcard store/*.c)
STORE_OBJ := $(STORE_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/store/schema_sql.o
STORE_LIB := $(BUILD)/libstore.a

GW_SRC := $(filter-out gateway/main.c,$(wildcard gateway/*.c))
GW_OBJ := $(GW_SRC:%.c=$(BUILD)/obj/%.o)
MAIN_OBJ := $(BUILD)/obj/gateway/main.o
BIN := $(BUILD)/cachegate

# tests/gpu/ needs a GPU: built by make (so a machine without one still compiles them),
# run by make test-gpu only
GPU_TEST_SRC := $(wildcard tests/gpu/test_*.c)
GPU_TEST_BIN := $(GPU_TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# GPU benchmarks (make bench-gpu): built by make with everything else (defined before all:,
# whose prerequisites expand where it is read), run on a GPU only
GPU_BENCH := $(BUILD)/bench/bench_gpu $(BUILD)/bench/bench_gpu_embed
UNIT_SRC := $(filter-out $(GPU_TEST_SRC),$(wildcard tests/*/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/%.c=$(BUILD)/tests/%)

NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
# The plugin: gateway/*.cu (entry point), embedder/*.cu and engine/*.cu (the
# backends). The CUDA runtime is linked statically; cuBLAS dynamically (a machine with a
# GPU has the toolkit's libraries; one without never loads the plugin far enough to care).
CUDA_HOME ?= /usr/local/cuda
CUDA_SRC := $(wildcard gateway/*.cu embedder/*.cu engine/*.cu)
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/cuobj/%.o)
CUDA_HDR := $(wildcard gateway/cuda_plugin.h embedder/emb_impl.h engine/backend.h engine/model.h engine/ops_cuda.h \
                       engine/kvcache.h engine/*.cuh embedder/*.cuh)
CUDA_LIB := build/libcachegate_cuda.so
NVARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
          -gencode arch=compute_90,code=compute_90
NVFLAGS := -O3 -std=c++17 -Xcompiler -fPIC,-Wall -Xcompiler -fvisibility=hidden $(NVARCH) \
           -Igateway -Iembedder -Iengine
NVLINK := -shared -cudart static -L$(CUDA_HOME)/lib64 -lcublas -Xlinker -rpath,$(CUDA_HOME)/lib64

PYTEST := .venv/bin/pytest
REF_VENV := build/ref-venv
LLAMA_VENV := build/llama-venv
GPTCACHE_VENV := build/gptcache-venv

.PHONY: all deps test unit cross-check e2e test-gpu test-cuda-emu bench bench-gpu run fmt clean \
        cuda fuzz

all: $(BIN) $(ENG_LIB) $(STORE_LIB) cuda $(GPU_TEST_BIN) $(GPU_BENCH)

deps:
	@bash deploy/deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/embedder/%.o: embedder/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -O3 -Wno-psabi -c $< -o $@

$(BUILD)/obj/engine/%.o: engine/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -O3 -Wno-psabi -c $< -o $@

# store/schema.sql compiled in as the C string store_schema_sql
$(BUILD)/gen/schema_sql.c: store/schema.sql
	@mkdir -p $(dir $@)
	{ echo '/* generated from store/schema.sql */'; echo 'const char store_schema_sql[] ='; \
	  sed 's/\\/\\\\/g; s/"/\\"/g; s/^/    "/; s/$$/\\n"/' $<; echo ';'; } >$@

$(BUILD)/obj/store/schema_sql.o: $(BUILD)/gen/schema_sql.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(STORE_LIB): $(STORE_OBJ)
	ar rcs $@ $^

$(EMB_LIB): $(EMB_OBJ)
	ar rcs $@ $^

$(ENG_LIB): $(ENG_OBJ)
	ar rcs $@ $^

$(BIN): $(GW_OBJ) $(MAIN_OBJ) $(EMB_LIB) $(ENG_LIB) $(STORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $(GW_OBJ) $(MAIN_OBJ) $(EMB_LIB) $(ENG_LIB) $(STORE_LIB) $(GW_LIBS)

# Unit tests link the gateway's objects from an archive, so a test that #includes the
# .c it tests (to reach its statics) does not pull that object in twice.
GW_LIB := $(BUILD)/libgateway.a
$(GW_LIB): $(GW_OBJ)
	ar rcs $@ $^

$(BUILD)/tests/%: tests/%.c $(GW_LIB) $(EMB_LIB) $(ENG_LIB) $(STORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -Wno-psabi -Igateway -Iembedder -Iengine -o $@ $< \
	    $(GW_LIB) $(EMB_LIB) $(ENG_LIB) $(STORE_LIB) \
	    $(LDFLAGS) -lcriterion $(GW_LIBS)

ifneq ($(NVCC),)
cuda: $(CUDA_LIB)
$(BUILD)/cuobj/%.o: %.cu $(CUDA_HDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@
$(CUDA_LIB): $(CUDA_OBJ)
	@mkdir -p build
	$(NVCC) $(NVARCH) $(NVLINK) -o $@ $(CUDA_OBJ)
else
cuda:
	@echo "CUDA: nvcc not found (PATH, /usr/local/cuda/bin); skipping $(CUDA_LIB)"
endif

# Two tests at a time, each with as many OpenMP threads as cores: the threads wait at a
# barrier asleep (OMP_WAIT_POLICY=passive), since spinning while the thread they wait for
# has no core stretched a 2-second model test past its 300-second limit.
unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; \
	    OMP_WAIT_POLICY=passive LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	    $$t --jobs 2; done
ifneq ($(SAN),1)
	@set -e; for isa in $(ISA_CAPS); do for t in $(ISA_BIN); do \
	    echo "== $$t with CACHEGATE_CPU_ISA=$$isa"; \
	    CACHEGATE_CPU_ISA=$$isa OMP_WAIT_POLICY=passive $$t --jobs 2; done; done
ifeq ($(MULTIARCH),x86_64-linux-gnu)
	@$(MAKE) --no-print-directory cross-check
endif
endif

# The kernel, forward-pass and loading suites again under each CACHEGATE_CPU_ISA below what
# this processor has, so that every machine also tests the intrinsics kernels of lesser ones
# and the portable C paths (not under SAN=1, whose run is already the longest part of CI). The
# engine's AVX-512 wants F, BW, VL and DQ, its AVX2 FMA too.
CPU_FLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
HAS_FLAGS = $(if $(filter-out $(CPU_FLAGS),$(1)),,y)
ISA_CAPS := $(if $(call HAS_FLAGS,avx512f avx512bw avx512vl avx512dq),avx2 portable,\
              $(if $(call HAS_FLAGS,avx2 fma),portable))
ISA_BIN := $(BUILD)/tests/engine/test_ops $(BUILD)/tests/engine/test_forward \
           $(BUILD)/tests/engine/test_load

# The engine's and the embedder's kernels name x86-64 instructions, each under a guard that
# leaves other processors their portable C. Both, and their unit tests, compiled for aarch64
# (nothing is run: a cross-built Criterion suite does not run under qemu-user), so that an
# unguarded x86 name fails here rather than on an ARM server. make test runs it on x86-64
# (not under SAN=1); elsewhere the build itself is that check.
CROSS_CC := aarch64-linux-gnu-gcc
CROSS_SRC := $(ENG_SRC) $(EMB_SRC) $(wildcard tests/engine/test_*.c tests/embedder/test_*.c)
cross-check:
	@echo "== $(CROSS_CC) -c engine/*.c embedder/*.c and their tests"
	@set -e; for f in $(CROSS_SRC); do \
	    $(CROSS_CC) $(filter-out -MMD -MP,$(CFLAGS)) -Igateway $(BLAS_CFLAGS) -Wno-psabi -O0 \
	        -c $$f -o /dev/null; \
	done

e2e: $(BIN)
	CACHEGATE_BIN=$(BIN) $(PYTEST) -q --durations=10 tests/e2e

test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
ifeq ($(SAN),1)
	@$(MAKE) --no-print-directory e2e SAN=1
else
	@$(MAKE) --no-print-directory test-cuda-emu
	@$(MAKE) --no-print-directory e2e
endif

test-gpu: deps all $(GPU_TEST_BIN)
	$(BIN) device --device cuda
	@set -e; for t in $(GPU_TEST_BIN); do echo "== $$t"; $$t --jobs 1; done
	CACHEGATE_E2E_DEVICE=cuda CACHEGATE_BIN=$(BIN) $(PYTEST) -q tests/e2e

# The CUDA sources, unchanged, on a CPU: tests/cudaemu/ emulates the CUDA runtime, cuBLAS, CUB
# and the GPU's threads (g++ only), gen.py rewrites the launches and __shared__, and the result
# is a stand-in $(CUDA_LIB) that tests/gpu/ loads. Only the fast suites: the whole-model ones
# take minutes each emulated. make test runs it, but not under SAN=1: ASan does not support the
# emulator's coroutines (swapcontext) and may report false positives.
EMU_DIR := $(BUILD)/cudaemu
EMU_LIB := $(EMU_DIR)/libcachegate_cuda.so
EMU_OBJ := $(EMU_DIR)/obj/emu.o $(EMU_DIR)/obj/gateway/cuda_plugin.o \
           $(EMU_DIR)/obj/embedder/backend_cuda.o $(EMU_DIR)/obj/engine/backend_cuda.o
EMU_HDR := $(CUDA_HDR) $(wildcard tests/cudaemu/*.h tests/cudaemu/include/*.h tests/cudaemu/include/*/*)
EMU_CXXFLAGS := -std=c++17 $(OPT) -g -fPIC -fvisibility=hidden -Wall -Wno-unknown-pragmas \
                $(shell grep -qw fma /proc/cpuinfo 2>/dev/null && echo -mfma) -ffp-contract=fast \
                -fno-strict-aliasing $(SANFLAGS) -Itests/cudaemu -Itests/cudaemu/include \
                -Igateway -Iembedder -Iengine $(BLAS_CFLAGS)
EMU_TESTS := $(EMU_DIR)/test_emb_cuda $(EMU_DIR)/test_eng_cuda

.PRECIOUS: $(EMU_DIR)/gen/%.cpp $(EMU_DIR)/gen/%.cuh
$(EMU_DIR)/gen/%.cpp: %.cu tests/cudaemu/gen.py
	@mkdir -p $(dir $@)
	python3 tests/cudaemu/gen.py $< $@
$(EMU_DIR)/gen/%.cuh: %.cuh tests/cudaemu/gen.py
	@mkdir -p $(dir $@)
	python3 tests/cudaemu/gen.py $< $@
$(EMU_DIR)/obj/emu.o: tests/cudaemu/emu.cpp $(EMU_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@
$(EMU_DIR)/obj/gateway/cuda_plugin.o: gateway/cuda_plugin.cu $(EMU_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -x c++ -c $< -o $@
$(EMU_DIR)/obj/%.o: $(EMU_DIR)/gen/%.cpp $(EMU_DIR)/gen/engine/kernels_cuda.cuh $(EMU_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@
$(EMU_LIB): $(EMU_OBJ)
	$(CXX) -shared $(LDFLAGS) -o $@ $^ $(BLAS_LIBS)

$(EMU_DIR)/test_%: tests/gpu/test_%.c $(GW_LIB) $(EMB_LIB) $(ENG_LIB) $(STORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -Wno-psabi -Igateway -DCUDA_PLUGIN_PATH='"$(EMU_LIB)"' -o $@ $< \
	    $(GW_LIB) $(EMB_LIB) $(ENG_LIB) $(STORE_LIB) $(LDFLAGS) -lcriterion $(GW_LIBS)

test-cuda-emu: $(EMU_LIB) $(EMU_TESTS)
	OMP_WAIT_POLICY=passive $(EMU_DIR)/test_eng_cuda --filter '@(ops|backend)/*' --jobs 2
	OMP_WAIT_POLICY=passive $(EMU_DIR)/test_emb_cuda --filter 'emb_cuda/@(bad_batches_refused|lengths_cover_short_and_truncated)' --jobs 2

$(BUILD)/bench/bench_embed: tests/bench/bench_embed.c $(EMB_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(EMB_LIB) $(LDFLAGS) $(GW_LIBS)

$(BUILD)/bench/bench_engine: tests/bench/bench_engine.c $(ENG_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(ENG_LIB) $(LDFLAGS) $(GW_LIBS)

$(BUILD)/bench/bench_grammar: tests/bench/bench_grammar.c $(ENG_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(ENG_LIB) $(LDFLAGS) $(GW_LIBS)

# The labelled paraphrase sets of the answer-cache benchmark (make bench, make judge-model)
PARAPHRASE_SETS := ../shared/data/paraphrase-dev.tsv \
    tests/bench/paraphrase-extra.tsv tests/bench/paraphrase-fresh.tsv \
    tests/bench/paraphrase-fresh2.tsv tests/bench/paraphrase-heldout.tsv \
    tests/bench/paraphrase-fresh3.tsv tests/bench/paraphrase-audit.tsv \
    tests/bench/paraphrase-fresh4.tsv tests/bench/paraphrase-fresh5.tsv \
    tests/bench/paraphrase-fresh6.tsv tests/bench/paraphrase-audit2.tsv \
    tests/bench/paraphrase-fresh7.tsv tests/bench/paraphrase-audit3.tsv \
    tests/bench/paraphrase-heldout2.tsv tests/bench/paraphrase-fresh8.tsv \
    tests/bench/paraphrase-fresh9.tsv tests/bench/paraphrase-fresh10.tsv \
    tests/bench/paraphrase-fresh11.tsv tests/bench/paraphrase-heldout3.tsv \
    tests/bench/paraphrase-heldout4.tsv tests/bench/paraphrase-heldout5.tsv \
    tests/bench/paraphrase-heldout6.tsv tests/bench/paraphrase-heldout7.tsv \
    tests/bench/paraphrase-heldout8.tsv tests/bench/paraphrase-heldout9.tsv \
    tests/bench/paraphrase-heldout10.tsv tests/bench/paraphrase-heldout11.tsv \
    tests/bench/paraphrase-heldout12.tsv tests/bench/paraphrase-heldout13.tsv \
    tests/bench/paraphrase-heldout14.tsv tests/bench/paraphrase-heldout15.tsv \
    tests/bench/paraphrase-heldout16.tsv tests/bench/paraphrase-heldout17.tsv \
    tests/bench/paraphrase-heldout18.tsv tests/bench/paraphrase-heldout20.tsv \
    tests/bench/paraphrase-heldout19.tsv tests/bench/paraphrase-heldout21.tsv \
    tests/bench/paraphrase-heldout22.tsv tests/bench/paraphrase-heldout23.tsv

# The guard's verdicts on pairs of known similarity (tests/bench/guard_sweep.c)
$(BUILD)/bench/guard_sweep: tests/bench/guard_sweep.c $(GW_LIB) $(EMB_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Igateway -o $@ $< $(GW_LIB) $(EMB_LIB) $(LDFLAGS) $(GW_LIBS)

# GPU benchmarks (make bench-gpu): their rules are below
$(BUILD)/bench/bench_gpu: tests/bench/bench_gpu.c $(ENG_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Igateway -o $@ $< $(ENG_LIB) $(LDFLAGS) $(BLAS_LIBS) -ldl -lm

$(BUILD)/bench/bench_gpu_embed: tests/bench/bench_gpu_embed.c $(EMB_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Igateway -o $@ $< $(EMB_LIB) $(LDFLAGS) $(GW_LIBS) -ldl -lm

bench: deps all $(BUILD)/bench/bench_embed $(BUILD)/bench/bench_engine \
       $(BUILD)/bench/bench_grammar $(REF_VENV)/.stamp \
       $(LLAMA_VENV)/.stamp $(GPTCACHE_VENV)/.stamp
	bash tests/bench/http.sh $(BIN)
	$(REF_VENV)/bin/python tests/bench/embed.py $(BUILD) models/all-minilm-l6-v2
	$(LLAMA_VENV)/bin/python tests/bench/engine.py $(BUILD) \
	    models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
	$(LLAMA_VENV)/bin/python tests/bench/structured.py $(BUILD) \
	    models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
	$(LLAMA_VENV)/bin/python tests/bench/prefix.py $(BUILD) \
	    models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
	.venv/bin/python tests/bench/cache.py $(BUILD) $(PARAPHRASE_SETS)
	$(GPTCACHE_VENV)/bin/python tests/bench/gptcache_peer.py ../shared/data/paraphrase-dev.tsv \
	    tests/bench/paraphrase-extra.tsv tests/bench/paraphrase-fresh.tsv \
	    tests/bench/paraphrase-fresh2.tsv tests/bench/paraphrase-heldout.tsv \
	    tests/bench/paraphrase-fresh3.tsv

# the GPU's checks and timings in one call (fails without a GPU)
bench-gpu: deps all
	bash tests/bench/gpu.sh $(BUILD)

run: deps all
	$(BIN) serve

fmt:
	clang-format -i $(wildcard gateway/*.[ch] gateway/*.cu embedder/*.[ch] engine/*.[ch] tests/*/*.c)

clean:
	rm -rf build

-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/tests/*/*.d)

# The embedder's reference fixtures, from sentence-transformers in its own venv
# (build/ref-venv, pinned in tests/ref/requirements.txt). The output is committed.
$(REF_VENV)/.stamp: tests/ref/requirements.txt
	python3 -m venv $(REF_VENV)
	$(REF_VENV)/bin/pip install -q --disable-pip-version-check -r tests/ref/requirements.txt
	touch $@

# GPTCache, the answer-cache benchmark's peer, in its own venv
$(GPTCACHE_VENV)/.stamp: tests/bench/requirements-gptcache.txt
	python3 -m venv $(GPTCACHE_VENV)
	$(GPTCACHE_VENV)/bin/pip install -q --disable-pip-version-check -r $<
	touch $@

.PHONY: embedder-fixtures
embedder-fixtures: deps $(REF_VENV)/.stamp
	$(REF_VENV)/bin/python tests/ref/make_embedder_fixtures.py models/all-minilm-l6-v2 \
	    tests/fixtures/embedder/reference.json

# libFuzzer targets (clang), each run for FUZZ_SECONDS on its seed corpus.
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Iembedder
build/fuzz/fuzz_safetensors: tests/fuzz/fuzz_safetensors.c embedder/safetensors.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $^ -ljansson

build/fuzz/fuzz_gguf: tests/fuzz/fuzz_gguf.c engine/gguf.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -Iengine -o $@ $^

build/fuzz/fuzz_grammar: tests/fuzz/fuzz_grammar.c engine/grammar.c engine/pattern.c engine/tokenizer.c \
                        engine/engine.c engine/gguf.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -Iengine -o $@ $^ -ljansson -lutf8proc -lxxhash

build/fuzz/fuzz_guard: tests/fuzz/fuzz_guard.c gateway/guard.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -Igateway -o $@ $^ -lpthread

# seeds: small valid files written by tests/fuzz/seeds.py
fuzz: deps build/fuzz/fuzz_safetensors build/fuzz/fuzz_gguf build/fuzz/fuzz_grammar \
      build/fuzz/fuzz_guard
	python3 tests/fuzz/seeds.py build/fuzz
	build/fuzz/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	    build/fuzz/corpus-safetensors
	build/fuzz/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=8192 build/fuzz/corpus-gguf
	build/fuzz/fuzz_grammar -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	    build/fuzz/corpus-grammar
	build/fuzz/fuzz_guard -max_total_time=$(FUZZ_SECONDS) -max_len=8192 build/fuzz/corpus-guard

.PHONY: pattern-fixtures
pattern-fixtures:
	python3 tests/ref/make_pattern_fixtures.py tests/fixtures/engine/patterns.json

# The judge's independent reference features (tests/ref/judge_features.py) and its forest
# (tests/bench/train_judge.py: gateway/judge_model.inc, tests/fixtures/judge/scores.tsv),
# in their own venv (build/judge-venv, pinned in tests/ref/requirements-judge.txt). The
# outputs are committed. judge-model embeds every bench pair first (several minutes).
JUDGE_VENV := build/judge-venv
$(JUDGE_VENV)/.stamp: tests/ref/requirements-judge.txt
	python3 -m venv $(JUDGE_VENV)
	$(JUDGE_VENV)/bin/pip install -q --disable-pip-version-check -r tests/ref/requirements-judge.txt
	touch $@

.PHONY: judge-fixtures judge-model
judge-fixtures: deps $(JUDGE_VENV)/.stamp
	$(JUDGE_VENV)/bin/python tests/ref/judge_features.py

judge-model: deps all $(BUILD)/bench/guard_sweep $(JUDGE_VENV)/.stamp
	.venv/bin/python tests/bench/cache.py $(BUILD) $(PARAPHRASE_SETS) \
	    --similarities $(BUILD)/judge-sims.tsv
	$(BUILD)/bench/guard_sweep $(BUILD)/judge-sims.tsv --features $(BUILD)/judge-features.tsv
	$(JUDGE_VENV)/bin/python tests/bench/train_judge.py $(BUILD)/judge-features.tsv --cv

.PHONY: engine-fixtures
engine-fixtures: deps $(REF_VENV)/.stamp
	$(REF_VENV)/bin/python tests/ref/make_engine_fixtures.py models/smollm2-135m-instruct \
	    SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/engine/reference.json
	$(REF_VENV)/bin/python tests/ref/make_tokenizer_fixtures.py models/smollm2-135m-instruct \
	    SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/engine/tokenizer.json

# llama.cpp through llama-cpp-python (compiled at install; several minutes), for the
# engine's second reference and as the peer in `make bench`.
$(LLAMA_VENV)/.stamp: tests/ref/requirements-llamacpp.txt
	python3 -m venv $(LLAMA_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=ON" $(LLAMA_VENV)/bin/pip install -q --disable-pip-version-check \
	    -r tests/ref/requirements-llamacpp.txt
	touch $@

.PHONY: llamacpp-fixtures
llamacpp-fixtures: deps $(LLAMA_VENV)/.stamp $(REF_VENV)/.stamp
	$(LLAMA_VENV)/bin/python tests/ref/make_llamacpp_fixtures.py \
	    models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf \
	    tests/fixtures/engine/llamacpp.json
	$(REF_VENV)/bin/python tests/ref/make_llamacpp_baseline.py models/smollm2-135m-instruct \
	    SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/engine/llamacpp.json \
	    tests/fixtures/engine/llamacpp_baseline.json
