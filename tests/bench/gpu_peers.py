"""Peers for make bench-gpu, on the same GPU, in PyTorch (the GPU machine's python3):

  embedder: sentence-transformers on the same model directory, F16 on the GPU, forward
            passes of pre-tokenized texts at batch 1 and 256 (the same built-in short
            questions as build/bench/bench_gpu_embed, read from its source; tokenization is
            not timed on either side);
  engine:   Hugging Face transformers' LlamaForCausalLM of Llama-3.2-1B shape with random F16
            weights (what bench_gpu times), eager, SDPA attention, its KV cache: decode
            tokens/s at batch 1, 16, 64 and 256 after a 512-token prompt.

usage: python3 tests/bench/gpu_peers.py EMBED_MODEL_DIR [--seconds 5]
"""
import argparse
import re
import time

import torch


def builtin_texts():
    src = open("tests/bench/bench_gpu_embed.c").read()
    body = src[src.index("builtin[] = {"):src.index("};", src.index("builtin[] = {"))]
    return [bytes(t, "utf-8").decode("unicode_escape") for t in re.findall(r'"((?:[^"\\]|\\.)*)"', body)]


def sync_time():
    torch.cuda.synchronize()
    return time.perf_counter()


def embedder(path, seconds):
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(path, device="cuda").half().eval()
    texts = builtin_texts()
    for batch in (1, 256):
        rows = [texts[i % len(texts)] for i in range(batch)]
        feats = {k: v.to("cuda") if torch.is_tensor(v) else v for k, v in m.tokenize(rows).items()}
        with torch.inference_mode():
            for _ in range(5):
                m(feats)["sentence_embedding"].float().cpu()
            n, t0 = 0, sync_time()
            while time.perf_counter() - t0 < seconds:
                m(feats)["sentence_embedding"].float().cpu()
                n += batch
            dt = sync_time() - t0
        print(f"sentence-transformers F16, batch {batch:3d}: {n / dt:12.1f} texts/s")


def engine(seconds):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                      vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).half().eval()
    for batch in (1, 16, 64, 256):
        ids = torch.randint(0, cfg.vocab_size, (batch, 512), device="cuda")
        with torch.inference_mode():
            out = model(input_ids=ids, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            for _ in range(8):
                out = model(input_ids=tok, past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            steps, t0 = 0, sync_time()
            while time.perf_counter() - t0 < seconds / 4 and steps < 256:
                out = model(input_ids=tok, past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
                steps += 1
            dt = sync_time() - t0
        print(f"transformers F16 eager, decode batch {batch:3d}: {batch * steps / dt:10.1f} "
              f"tokens/s ({dt / steps * 1e3:.2f} ms a step)")
        del out, past
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("embed_model")
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    embedder(a.embed_model, a.seconds)
    engine(a.seconds)


if __name__ == "__main__":
    main()
