#!/usr/bin/env bash
# make bench-gpu: on a machine with a GPU, checks the CUDA backends against the CPU ones
# (the GPU tests) and then times them, printing one table: the engine on a synthetic
# Llama-3.2-1B-shaped model and on the default model (decode at batch 1/16/64/256,
# prefill, memory bandwidth and decode at batch 1 as a share of its limit), the embedder
# (texts/s at batch 1 and 256, CPU beside), TTFT on the shared-prefix workload with the
# prefix cache on and off, and the PyTorch peers on the same GPU (tests/bench/gpu_peers.py)
# where python3 has them.
# Fails at once when no GPU is usable.
#
# usage: tests/bench/gpu.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
engine_model=models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
embed_model=models/all-minilm-l6-v2

echo "== device"
"$build/cachegate" device --device cuda
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.sm \
    --format=csv,noheader || true

echo "== checks (CUDA against the CPU)"
for t in "$build"/tests/gpu/test_*; do
    case $t in *.d) continue ;; esac
    echo "-- $t"
    "$t" --jobs 1
done

echo "== engine: synthetic Llama-3.2-1B shape, then $engine_model"
"$build/bench/bench_gpu" "$engine_model"

echo "== embedder: $embed_model"
"$build/bench/bench_gpu_embed" "$embed_model"

# the workload's requests are made with llama.cpp's tokenizer (build/llama-venv, from make
# bench) and kept in tests/bench/prefix-workload.json, so that any Python with httpx runs it
workload=tests/bench/prefix-workload.json
py=python3
[ -x build/llama-venv/bin/python ] && py=build/llama-venv/bin/python
if { [ -f "$workload" ] && "$py" -c 'import httpx' 2>/dev/null; } ||
    "$py" -c 'import llama_cpp, httpx' 2>/dev/null; then
    echo "== shared-prefix workload through the HTTPS API, models on the GPU"
    # 32 output tokens: the README's GPU table was measured so
    "$py" tests/bench/prefix.py "$build" "$engine_model" --device cuda -O 32 \
        --rows on16,on1,off16,off1 --workload "$workload"
else
    echo "== shared-prefix workload skipped: no Python with httpx (and llama-cpp-python to"
    echo "   make $workload)"
fi

if python3 -c 'import torch, sentence_transformers, transformers' 2>/dev/null; then
    echo "== peers on the same GPU: sentence-transformers, Hugging Face transformers"
    python3 tests/bench/gpu_peers.py "$embed_model"
else
    echo "== peers skipped: python3 has no torch, sentence-transformers and transformers"
fi
