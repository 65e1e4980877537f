"""How close can any implementation get to llama.cpp's logits on the default model? Two
measurements behind the tolerance of tests/engine/test_llamacpp.c (not part of `make test`;
run in the venv of `make llamacpp-fixtures`):

1. llama.cpp against itself: the fixture prompts evaluated in one batch (as the fixtures
   were made) and one token at a time, same build, same file, same threads. The two paths
   sum in different orders (tiled matrix products against vector dot products), and the
   8-bit rounding of activations in its Q4_1 and Q8_0 products turns those last-bit
   differences into whole quantization steps.
2. A numpy emulation of llama.cpp's CPU arithmetic (activations rounded to Q8_1 blocks for
   the Q4_1 rows and Q8_0 for the output head, integer block sums, F16 queries, keys,
   values and attention probabilities, as ggml's CPU backend does without flash attention).
   Its layer-0 outputs are compared with llama.cpp's own tensors (read through the eval
   callback), then its logits with the fixture.

usage: python llamacpp_agreement_limits.py MODEL.gguf tests/fixtures/engine/llamacpp.json
"""

import ctypes
import json
import struct
import sys

import llama_cpp
import numpy as np
from llama_cpp import Llama, _internals

f32 = np.float32

# ---------------------------------------------------------------- GGUF (what this needs)

GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q",
                11: "q", 12: "d"}


def read_gguf(path):
    """(metadata dict, {name: (type, dims, bytes)}) of a GGUF file, versions 2 and 3."""
    data = memoryview(open(path, "rb").read())
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal pos
        n = take("Q")
        s = bytes(data[pos:pos + n]).decode("utf-8", "replace")
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(GGUF_SCALARS[t])

    assert bytes(data[:4]) == b"GGUF", "not a GGUF file"
    pos = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    assert version in (2, 3)
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    sizes = {0: (1, 4), 8: (32, 34), 3: (32, 20)}  # F32, Q8_0, Q4_1: (values, bytes) a block
    tensors = {}
    for name, dims, t, off in infos:
        if t not in sizes:
            raise SystemExit(f"{name}: tensor type {t} is not one this script reads")
        per, nbytes = sizes[t]
        n = int(np.prod(dims))
        tensors[name] = (t, dims, data[base + off:base + off + n // per * nbytes])
    return meta, tensors


# ---------------------------------------------------------------- the emulation


def f16r(x):
    return np.asarray(x, f32).astype(np.float16).astype(f32)


class Model:
    def __init__(self, path):
        meta, self.t = read_gguf(path)
        a = meta["general.architecture"]
        self.L = meta[f"{a}.block_count"]
        self.D = meta[f"{a}.embedding_length"]
        self.H = meta[f"{a}.attention.head_count"]
        self.HKV = meta[f"{a}.attention.head_count_kv"]
        self.theta = meta[f"{a}.rope.freq_base"]
        self.eps = meta[f"{a}.attention.layer_norm_rms_epsilon"]
        self.hd = self.D // self.H
        self.cache = {}

    def blocks(self, name, nbytes):
        t, dims, raw = self.t[name]
        return np.frombuffer(raw, np.uint8).reshape(dims[1], dims[0] // 32, nbytes)

    def q4_1(self, name):
        if name not in self.cache:
            b = self.blocks(name, 20)
            d = b[:, :, 0:2].copy().view(np.float16)[:, :, 0].astype(f32)
            m = b[:, :, 2:4].copy().view(np.float16)[:, :, 0].astype(f32)
            q = np.concatenate([b[:, :, 4:] & 15, b[:, :, 4:] >> 4], axis=2).astype(np.int64)
            self.cache[name] = (d, m, q)
        return self.cache[name]

    def q8_0(self, name):
        if name not in self.cache:
            b = self.blocks(name, 34)
            d = b[:, :, 0:2].copy().view(np.float16)[:, :, 0].astype(f32)
            self.cache[name] = (d, b[:, :, 2:].copy().view(np.int8).astype(np.int64))
        return self.cache[name]

    def vec(self, name):
        return np.frombuffer(self.t[name][2], f32)


def quantize_q8(x):
    """Blocks of 32 as ggml's AVX path rounds them: scale amax/127 (stored F16), values
    round(x * 127/amax) to nearest even, block sum times the unrounded scale (F16)."""
    xb = x.reshape(x.shape[0], -1, 32)
    amax = np.abs(xb).max(axis=2).astype(f32)
    d = (amax / f32(127)).astype(f32)
    with np.errstate(divide="ignore"):
        inv = np.where(amax != 0, f32(127) / amax, f32(0)).astype(f32)
    q = np.rint(xb * inv[:, :, None]).astype(np.int64)
    s = (d * q.sum(axis=2).astype(f32)).astype(f32)
    return f16r(d), f16r(s), q


def mm_q4_1(m, name, x):
    d, mn, q = m.q4_1(name)
    xd, xs, xq = quantize_q8(x)
    sumi = np.einsum("obk,tbk->tob", q, xq).astype(np.float64)
    r = (sumi * (d[None] * xd[:, None, :]).astype(np.float64)).sum(2)
    return (r + (mn[None].astype(np.float64) * xs[:, None, :]).sum(2)).astype(f32)


def mm_q8_0(m, name, x):
    d, q = m.q8_0(name)
    xd, _, xq = quantize_q8(x)
    out = np.empty((x.shape[0], q.shape[0]), f32)
    for t in range(x.shape[0]):
        sumi = np.einsum("obk,bk->ob", q, xq[t]).astype(np.float64)
        out[t] = (sumi * (d * xd[t][None]).astype(np.float64)).sum(1)
    return out


def rmsnorm(x, w, eps):
    mean = ((x * x).astype(np.float64).sum(1) / x.shape[1]).astype(f32)
    return (x * (f32(1) / np.sqrt(mean + f32(eps)))[:, None]).astype(f32) * w[None]


def rope(x, n_heads, hd, theta):
    """ggml's normal mode (pairs 2i, 2i+1), angles by repeated multiplication in float"""
    x = x.reshape(x.shape[0], n_heads, hd).copy()
    step = f32(theta) ** f32(-2.0 / hd)
    for t in range(x.shape[0]):
        th = f32(t)
        for i in range(0, hd, 2):
            c, s = f32(np.cos(th)), f32(np.sin(th))
            a, b = x[t, :, i].copy(), x[t, :, i + 1].copy()
            x[t, :, i], x[t, :, i + 1] = a * c - b * s, a * s + b * c
            th = f32(th * step)
    return x.reshape(x.shape[0], -1)


def forward(m, ids):
    d, q = m.q8_0("token_embd.weight")
    x = (q[ids].astype(f32) * d[ids][:, :, None]).reshape(len(ids), m.D).astype(f32)
    T, hd, g = len(ids), m.hd, m.H // m.HKV
    mask = np.tril(np.ones((T, T), bool))
    out = {}
    for l in range(m.L):
        p = f"blk.{l}."
        h = rmsnorm(x, m.vec(p + "attn_norm.weight"), m.eps)
        qh = rope(mm_q4_1(m, p + "attn_q.weight", h), m.H, hd, m.theta)
        kh = rope(mm_q4_1(m, p + "attn_k.weight", h), m.HKV, hd, m.theta)
        vh = mm_q4_1(m, p + "attn_v.weight", h)
        qf, kf = f16r(qh).reshape(T, m.H, hd), f16r(kh).reshape(T, m.HKV, hd)
        vf = f16r(vh).reshape(T, m.HKV, hd)
        att = np.zeros((T, m.H, hd), f32)
        for hh in range(m.H):
            sc = (qf[:, hh].astype(np.float64) @ kf[:, hh // g].T.astype(np.float64)).astype(f32)
            sc = np.where(mask, sc * f32(1 / np.sqrt(hd)), -np.inf).astype(f32)
            e = np.exp(sc - sc.max(1, keepdims=True)).astype(f32)
            pr = f16r(e / e.astype(np.float64).sum(1, keepdims=True).astype(f32))
            att[:, hh] = (pr.astype(np.float64) @ vf[:, hh // g].astype(np.float64)).astype(f32)
        x = (x + mm_q4_1(m, p + "attn_output.weight", att.reshape(T, -1))).astype(f32)
        out[f"ffn_inp-{l}"] = x
        h = rmsnorm(x, m.vec(p + "ffn_norm.weight"), m.eps)
        ga, up = mm_q4_1(m, p + "ffn_gate.weight", h), mm_q4_1(m, p + "ffn_up.weight", h)
        sw = (ga / (f32(1) + np.exp(-ga)) * up).astype(f32)
        x = (x + mm_q4_1(m, p + "ffn_down.weight", sw)).astype(f32)
        out[f"l_out-{l}"] = x
    h = rmsnorm(x, m.vec("output_norm.weight"), m.eps)
    return mm_q8_0(m, "token_embd.weight", h), out


# ---------------------------------------------------------------- llama.cpp's own tensors


class GgmlTensor(ctypes.Structure):  # ggml.h of the pinned llama-cpp-python
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
                ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int),
                ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32),
                ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p),
                ("name", ctypes.c_char * 64)]


def llama(path, n_batch, tensors=None):
    """A Llama whose eval callback copies contiguous F32 results into tensors (by name,
    first of each) when tensors is a dict."""
    def cb(t, ask, _ud):
        tt = GgmlTensor.from_address(t)
        name = tt.name.decode()
        if ask or tensors is None or tt.type != 0 or name in tensors:
            return True
        ne, nb = list(tt.ne), list(tt.nb)
        if nb[0] == 4 and nb[1] == 4 * ne[0] and nb[2] == nb[1] * ne[1]:
            n = ne[0] * ne[1] * ne[2] * ne[3]
            buf = (ctypes.c_float * n).from_address(tt.data)
            tensors[name] = np.frombuffer(buf, f32).copy().reshape(-1, ne[0])
        return True

    hook = llama_cpp.ggml_backend_sched_eval_callback(cb)
    orig = _internals.LlamaContext.__init__

    def init(self, *, model, params, verbose=True):
        params.cb_eval, params.cb_eval_user_data = hook, None
        orig(self, model=model, params=params, verbose=verbose)

    _internals.LlamaContext.__init__ = init
    try:
        llm = Llama(model_path=path, n_ctx=256, n_threads=2, n_batch=n_batch, n_ubatch=n_batch,
                    logits_all=True, verbose=False, seed=0)
    finally:
        _internals.LlamaContext.__init__ = orig
    llm._keep_hook = hook
    return llm


def main():
    model_path, fixture = sys.argv[1], json.load(open(sys.argv[2]))
    prompts = [(p["ids"][:len(p["top_ids"])], p) for p in fixture["prompts"]]

    rows = {}
    for n_batch in (512, 1):
        llm = llama(model_path, n_batch)
        rows[n_batch] = []
        for ids, _ in prompts:
            llm.reset()
            llm.eval(ids)
            rows[n_batch].append(np.array([llm.scores[i] for i in range(len(ids))]))
    agree = sum(int((a.argmax(1) == b.argmax(1)).sum()) for a, b in zip(rows[512], rows[1]))
    worst = max(float(np.abs(a - b).max()) for a, b in zip(rows[512], rows[1]))
    total = sum(len(ids) for ids, _ in prompts)
    print(f"llama.cpp, one batch vs one token at a time: top-1 {agree}/{total}, "
          f"largest logit difference {worst:.3f}")

    m = Model(model_path)
    ids0 = prompts[0][0]
    tensors = {}
    llm = llama(model_path, 512, tensors)
    llm.eval(ids0)
    _, mine = forward(m, ids0)
    for name in ("ffn_inp-0", "l_out-0"):
        ref = tensors[name]
        rel = float(np.abs(ref - mine[name]).max() / np.abs(ref).max())
        print(f"emulation vs llama.cpp, layer 0 {name}: largest relative difference {rel:.2e}")
    agree, worst = 0, 0.0
    for ids, p in prompts:
        logits, _ = forward(m, ids)
        for i in range(len(ids)):
            agree += int(np.argmax(logits[i]) == p["top_ids"][i][0])
            for tid, tl in zip(p["top_ids"][i], p["top_logits"][i]):
                worst = max(worst, abs(float(logits[i][tid]) - tl))
    print(f"emulation vs the fixture (llama.cpp, one batch): top-1 {agree}/{total}, largest "
          f"logit difference {worst:.3f}")


if __name__ == "__main__":
    main()
