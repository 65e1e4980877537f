"""Writes tests/fixtures/engine/llamacpp_baseline.json: how closely Hugging Face
transformers (F32, the same GGUF dequantized) agrees with llama.cpp on the prompts of
tests/fixtures/engine/llamacpp.json: teacher-forced top-1 agreement and, per prompt, the
length of the greedy continuation equal to llama.cpp's.

llama.cpp quantizes activations to 8 bits inside its Q4_1/Q8_0 dot products; an exact F32
implementation of the same weights therefore differs from it by tenths of a logit, and
greedy continuations part where llama.cpp's top-2 margin is small. This baseline is what
test_llamacpp.c holds the engine to: at least as close to llama.cpp as transformers is.

usage: python make_llamacpp_baseline.py MODEL_DIR GGUF_NAME LLAMACPP_JSON OUT_JSON
"""

import json
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM


def main():
    model_dir, gguf_name, fixture, out = sys.argv[1:5]
    model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf_name,
                                                 dtype=torch.float32).eval()
    with open(fixture, encoding="utf-8") as f:
        ref = json.load(f)
    rows, agree, total = [], 0, 0
    for p in ref["prompts"]:
        ids = list(p["ids"])
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        n_agree = sum(int(logits[i].argmax()) == top[0] for i, top in enumerate(p["top_ids"]))
        agree += n_agree
        total += len(p["top_ids"])
        seq, same = list(ids), 0
        for want in p["greedy"]:
            with torch.no_grad():
                nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
            if nxt != want:
                break
            same += 1
            seq.append(nxt)
        rows.append({"text": p["text"], "top1_agree": n_agree, "positions": len(p["top_ids"]),
                     "greedy_equal": same})
        print(f"{p['text'][:30]!r}: top-1 {n_agree}/{len(p['top_ids'])}, greedy equal {same}")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": f"transformers {transformers.__version__}, torch "
                                f"{torch.__version__}, float32",
                   "against": ref["generator"], "top1_agree": agree, "positions": total,
                   "prompts": rows}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"top-1 {agree}/{total}; wrote {out}")


if __name__ == "__main__":
    main()
