#!/usr/bin/env bash
# make bench-gpu: on a machine with a GPU, checks the CUDA backends against the CPU ones
# (the GPU tests) and then times them, printing one table: the engine on a synthetic
# Llama-3.2-1B-shaped model and on the default model (decode at batch 1/16/64/256,
# prefill, memory bandwidth and decode at batch 1 as a share of its limit), the embedder
# (texts/s at batch 1 and 256, CPU beside), and, when llama-cpp-python is installed for
# its tokenizer, TTFT on the shared-prefix workload with the prefix cache on and off.
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

if [ -x build/llama-venv/bin/python ] && build/llama-venv/bin/python -c 'import llama_cpp, httpx' \
    2>/dev/null; then
    echo "== shared-prefix workload through the HTTPS API, models on the GPU"
    build/llama-venv/bin/python tests/bench/prefix.py "$build" "$engine_model" --device cuda \
        --rows on16,on1,off16,off1
else
    echo "== shared-prefix workload skipped: build/llama-venv (llama-cpp-python, for the"
    echo "   workload's tokenizer) is not installed; make bench installs it"
fi
