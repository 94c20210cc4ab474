#!/usr/bin/env python3
"""Measure GEMM throughput on a GPU and write a ddlsim compute calibration file.

Runs on a machine with PyTorch and a CUDA GPU (not on ddlsim's build machines):

    python3 scripts/calibrate_compute.py --device h100-sxm --out calibration/h100.json

For every (m, n, k) of a grid of square, skinny and transformer-like shapes, and each
dtype asked for, it times torch.matmul with CUDA events (warm-up runs first, then the
median of --repeats timed runs of --iterations back-to-back calls, captured in a CUDA
graph so that the host's launches do not pace small kernels: kernel times) and records
the achieved TFLOP/s (2 m n k / time). It times a 1 GiB elementwise kernel (the HBM
bandwidth memory-bound kernels see) and two transformer layers forward and backward: a
Llama-style one (RMSNorm, QKV, flash attention via scaled_dot_product_attention, output
projection, SwiGLU MLP) and a Mixtral-style one whose MLP is 8 experts, top 2, with the
routing held balanced; and writes them all into the JSON file that
`ddlsim workload --calibration FILE` reads:

    {"device": "h100-sxm", "gpu": "<torch.cuda.get_device_name()>",
     "software": "torch X, CUDA Y", "source": "scripts/calibrate_compute.py on <date>",
     "gemm": [{"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 712.3}, ...],
     "memory": {"bytes": 2147483648, "gbytes_per_s": 2900.5},
     "layer": {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "seq": 4096,
               "batch": 1, "forward_ms": ..., "backward_ms": ...},
     "moe_layer": {..., "experts": 8, "experts_per_token": 2, ...}}

"device" must be the ddlsim catalog id of the GPU measured (ddlsim refuses a file for
another device). The "layer" and "moe_layer" entries are not used for calibration: they
are the measurements to compare the compute model's prediction against. `ddlsim workload
--compare FILE` prints every point beside the built-in model's prediction, and each layer
predicted by the model and by the model with the file's GEMM and memory measurements.
"""
import argparse
import datetime
import json
import os
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", required=True, help="ddlsim catalog id of this GPU, e.g. h100-sxm, h200, a100-80gb")
    p.add_argument("--out", required=True, help="the calibration JSON file to write")
    p.add_argument("--dtypes", default="bf16", help="comma-separated: bf16, fp16, fp32")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per shape (the median is kept)")
    p.add_argument("--iterations", type=int, default=10, help="calls per timed run")
    p.add_argument("--quick", action="store_true", help="a small grid, for a first try")
    return p.parse_args()


def shapes(quick):
    sizes = [256, 1024, 4096, 8192] if quick else [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    out = [(s, s, s) for s in sizes]
    # Skinny and transformer-like shapes: tokens x hidden x (hidden, 3 hidden, 4 hidden).
    for tokens in ([2048, 8192] if quick else [512, 2048, 8192, 32768]):
        for hidden in ([4096] if quick else [2048, 4096, 8192]):
            for n in (hidden, 3 * hidden, 4 * hidden):
                out.append((tokens, n, hidden))
    for m in ([16, 64] if quick else [8, 16, 32, 64, 128]):
        out.append((m, 8192, 8192))
    return sorted(set(out))


GRAPHS = {"work": True}  # cleared when a capture fails: time plain calls from then on


def time_ms(torch, fn, repeats, iterations, graph=False):
    """Median over `repeats` of the time per call of `iterations` back-to-back calls.

    With graph=True the calls are captured once in a CUDA graph and the graph is
    replayed, so that the host's launch time does not pace short kernels: the result is
    a kernel's time, as `ddlsim workload --compare` predicts it. Falls back to plain
    calls where capture fails."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    run = None
    if graph and GRAPHS["work"]:
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                fn()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(iterations):
                    fn()
            g.replay()
            torch.cuda.synchronize()
            run = g.replay
        except Exception as e:  # capture unsupported here: time plain calls
            print(f"CUDA graph capture failed ({e}); timing plain calls from here on", file=sys.stderr)
            GRAPHS["work"] = False
            run = None
    if run is None:
        def run():
            for _ in range(iterations):
                fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iterations)
    times.sort()
    return times[len(times) // 2]


def measure_gemms(torch, args):
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 on fp32 units, as ddlsim assumes
    points = []
    for name in args.dtypes.split(","):
        dt = dtypes[name.strip()]
        for m, n, k in shapes(args.quick):
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            c = torch.empty(m, n, device="cuda", dtype=dt)
            ms = time_ms(torch, lambda: torch.matmul(a, b, out=c), args.repeats, args.iterations, graph=True)
            tflops = 2.0 * m * n * k / (ms * 1e-3) / 1e12
            points.append({"m": m, "n": n, "k": k, "dtype": name.strip(), "tflops": round(tflops, 2)})
            print(f"gemm {name} {m}x{n}x{k}: {ms:.4f} ms, {tflops:.1f} TFLOP/s", file=sys.stderr)
            del a, b, c
    return points


def measure_memory(torch, args):
    """A 1 GiB elementwise kernel (b = a x 1, bf16): bytes read and written over its time.

    Not copy_(): captured in a CUDA graph, a device-to-device copy becomes a memcpy node
    that the copy engines serve (on an H200, 2.7 TB/s against 4.3 TB/s for a kernel), and
    the bandwidth wanted is the one memory-bound kernels see."""
    size = 1 << 30
    a = torch.zeros(size // 2, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    ms = time_ms(torch, lambda: torch.mul(a, 1.0, out=b), args.repeats, args.iterations, graph=True)
    gbps = 2.0 * size / (ms * 1e-3) / 1e9
    print(f"memory: {size} bytes read and written: {ms:.4f} ms, {gbps:.1f} GB/s", file=sys.stderr)
    del a, b
    return {"bytes": 2 * size, "gbytes_per_s": round(gbps, 1)}


def attention_half(torch, F, shape, w):
    """RMSNorm, QKV, flash attention (scaled_dot_product_attention, causal), output
    projection and residual of a Llama-style layer: a function of the input."""
    hidden, heads, kv_heads, seq, batch = shape["hidden"], shape["heads"], shape["kv_heads"], shape["seq"], shape["batch"]
    d = hidden // heads
    wqkv, wo = w(hidden, hidden + 2 * kv_heads * d), w(hidden, hidden)

    def half(t):
        qkv = rms(torch, t) @ wqkv
        q, k, v = qkv.split([hidden, kv_heads * d, kv_heads * d], dim=-1)
        q = q.view(batch, seq, heads, d).transpose(1, 2)
        k = k.view(batch, seq, kv_heads, d).transpose(1, 2).repeat_interleave(heads // kv_heads, dim=1)
        v = v.view(batch, seq, kv_heads, d).transpose(1, 2).repeat_interleave(heads // kv_heads, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, seq, hidden)
        return t + a @ wo

    return half, [wqkv, wo]


def rms(torch, t):
    return t * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(t.dtype)


def time_layer(torch, args, shape, layer, x, weights):
    """Forward, and forward plus backward, of `layer` on `x` (plain calls): the entry a
    calibration file holds, with the shape."""
    fwd = time_ms(torch, lambda: layer(x), args.repeats, args.iterations)
    grad = torch.ones_like(layer(x))

    # Gradients returned, not accumulated into .grad: no add of this backward's gradients
    # into the previous iteration's (ddlsim prices that accumulation separately).
    def fwd_bwd():
        torch.autograd.grad(layer(x), [x] + weights, grad)

    both = time_ms(torch, fwd_bwd, args.repeats, max(1, args.iterations // 2))
    return dict(shape, dtype="bf16", forward_ms=round(fwd, 4), backward_ms=round(both - fwd, 4))


def layer_weights(torch):
    # Leaf weights (scaled before requires_grad), so that backward is the layer's alone.
    return lambda *s: (torch.randn(*s, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()


def measure_layer(torch, args, shape=None):
    import torch.nn.functional as F
    shape = shape or {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "seq": 4096, "batch": 1}
    w = layer_weights(torch)
    attention, weights = attention_half(torch, F, shape, w)
    ffn = shape["ffn"]
    wgu, wdown = w(shape["hidden"], 2 * ffn), w(ffn, shape["hidden"])
    x = torch.randn(shape["batch"], shape["seq"], shape["hidden"], device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def layer(t):
        t = attention(t)
        g, u = (rms(torch, t) @ wgu).split([ffn, ffn], dim=-1)
        return t + (F.silu(g) * u) @ wdown

    out = time_layer(torch, args, shape, layer, x, weights + [wgu, wdown])
    print(f"layer: forward {out['forward_ms']:.3f} ms, backward {out['backward_ms']:.3f} ms", file=sys.stderr)
    return out


def measure_moe_layer(torch, args, shape=None):
    """A Mixtral-like layer: the same attention half, then a mixture-of-experts MLP with
    balanced routing, ddlsim's default (every expert gets b s k / E rows).

    The router's logits, softmax and top-k run as in Mixtral, but a fixed bias added
    before the top-k makes token t pick experts (k t) mod E .. (k t + k - 1) mod E; the
    routing weights are the softmax's at those experts, renormalised. The rows are sorted
    by expert (argsort), gathered (index_select), multiplied by the experts' SwiGLU
    weights as batched GEMMs (torch.bmm, E x rows x hidden), put back in token order and
    summed with their weights."""
    import torch.nn.functional as F
    shape = shape or {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "experts": 8,
                      "experts_per_token": 2, "seq": 4096, "batch": 1}
    hidden, ffn, e, k = shape["hidden"], shape["ffn"], shape["experts"], shape["experts_per_token"]
    tokens = shape["batch"] * shape["seq"]
    rows = tokens * k // e
    w = layer_weights(torch)
    attention, weights = attention_half(torch, F, shape, w)
    router, wgu, wdown = w(hidden, e), w(e, hidden, 2 * ffn), w(e, ffn, hidden)
    picks = (torch.arange(tokens * k, device="cuda") % e).view(tokens, k)
    bias = F.one_hot(picks, e).sum(1).float() * 1e4  # tokens x E, 1e4 at the picked experts
    x = torch.randn(shape["batch"], shape["seq"], hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def layer(t):
        t = attention(t)
        flat = rms(torch, t).view(tokens, hidden)
        probs = F.softmax((flat @ router).float(), dim=-1)
        chosen = (probs + bias).topk(k, dim=-1)[1]  # tokens x k expert ids
        gates = probs.gather(1, chosen)
        gates = (gates / gates.sum(-1, keepdim=True)).to(t.dtype)
        order = chosen.flatten().argsort(stable=True)  # (token, slot) pairs by expert
        xs = flat.index_select(0, order // k).view(e, rows, hidden)
        g, u = torch.bmm(xs, wgu).split([ffn, ffn], dim=-1)
        ys = torch.bmm(F.silu(g) * u, wdown).view(tokens * k, hidden)
        back = ys.index_select(0, order.argsort()).view(tokens, k, hidden)
        mixed = (back * gates.unsqueeze(-1)).sum(1)
        return t + mixed.view(shape["batch"], shape["seq"], hidden)

    out = time_layer(torch, args, shape, layer, x, weights + [router, wgu, wdown])
    print(f"moe layer: forward {out['forward_ms']:.3f} ms, backward {out['backward_ms']:.3f} ms", file=sys.stderr)
    return out


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("calibrate_compute.py: PyTorch is not installed (pip install torch, on the GPU machine)")
    if not torch.cuda.is_available():
        sys.exit("calibrate_compute.py: no CUDA GPU is visible to PyTorch")
    doc = {
        "device": args.device,
        "gpu": torch.cuda.get_device_name(),
        "software": f"torch {torch.__version__}, CUDA {torch.version.cuda}",
        "source": "scripts/calibrate_compute.py on " + datetime.date.today().isoformat(),
        "gemm": measure_gemms(torch, args),
        "memory": measure_memory(torch, args),
        "layer": measure_layer(torch, args),
        "moe_layer": measure_moe_layer(torch, args),
    }
    doc["software"] += ("; GEMMs and memory kernel timed as CUDA graphs (kernel times)" if GRAPHS["work"] else
                        "; CUDA graph capture failed: GEMMs and memory kernel from then on timed as plain calls")
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)  # whole or not at all
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
