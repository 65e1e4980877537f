"""Writes tests/fixtures/engine/reference.json: teacher-forced logits of the default chat
model computed by Hugging Face transformers (the independent reference), which reads the
same GGUF file and dequantizes it itself. For each prompt: the token ids (transformers'
tokenizer built from the GGUF metadata), and at every position the reference's top-10
token ids with their logits. Checked by tests/engine/test_forward.c.

usage: python make_engine_fixtures.py MODEL_DIR GGUF_NAME OUT_JSON
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Caching gateways answer repeated questions from memory, so that the model only runs "
    "when something new is asked. In this way the cost per request drops sharply.",
]
TOPK = 10


def main():
    model_dir, gguf_name, out = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(os.cpu_count())
    tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf_name)
    model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf_name,
                                                 dtype=torch.float32)
    model.eval()
    chat = tok.apply_chat_template([{"role": "user", "content": "What is 2+2?"}],
                                   tokenize=False, add_generation_prompt=True)
    rows = []
    for text in PROMPTS + [chat]:
        ids = tok(text, add_special_tokens=False).input_ids
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        top = torch.topk(logits, TOPK, dim=-1)
        rows.append({
            "text": text,
            "ids": ids,
            "top_ids": top.indices.tolist(),
            "top_logits": [[float(f"{x:.6g}") for x in r] for r in top.values.tolist()],
        })
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": f"transformers {transformers.__version__}, torch {torch.__version__}",
                   "model": gguf_name, "prompts": rows}, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(rows)} prompts to {out}")


if __name__ == "__main__":
    main()
