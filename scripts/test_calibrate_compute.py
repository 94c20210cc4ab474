#!/usr/bin/env python3
"""Runs scripts/calibrate_compute.py against a stand-in for PyTorch, on any machine.

The calibration script runs for real only on a lent GPU, once; this check makes sure
beforehand that it runs from end to end (argument parsing, the GEMM grid, the memory kernel, the
transformer layer with its backward, CUDA-graph timing and its fallback) and writes a
file that `ddlsim workload --compare` accepts. The stand-in computes nothing: every
tensor operation returns a tensor, and a timed run of --iterations calls takes as long
as the last timed operation would at 400 TFLOP/s (a GEMM), 3,000 GB/s (the memory kernel) or
100 ms per call (each layer: its attention is timed, its batched expert GEMMs are not).

Usage: test_calibrate_compute.py DDLSIM OUT_DIR
"""
import contextlib
import json
import os
import subprocess
import sys
import types

ITERATIONS = 10  # the script's default --iterations
STATE = {"ms": 0.0, "capturing": False}  # what the next timed run takes; inside a graph capture


# The tensor methods the script may call; any other name is an error (a typo would pass
# a stand-in that accepted every name).
METHODS = {"view", "transpose", "reshape", "float", "pow", "mean", "to", "repeat_interleave", "gather", "sum",
           "flatten", "argsort", "index_select", "unsqueeze"}


class FakeTensor:
    def __init__(self, *shape):
        self.shape = shape
        self.dtype = "bf16"

    def __getattr__(self, name):
        if name not in METHODS:
            raise AttributeError(f"stand-in tensor has no method {name!r}")
        return lambda *a, **k: FakeTensor(*self.shape)

    def requires_grad_(self, flag=True):
        return self

    def split(self, sizes, dim=-1):
        return [FakeTensor() for _ in sizes]

    def topk(self, k, dim=-1):
        return FakeTensor(), FakeTensor()

    def backward(self, grad=None):
        return None

    def __mul__(self, other):
        return self

    __rmul__ = __add__ = __radd__ = __sub__ = __matmul__ = __truediv__ = __floordiv__ = __mod__ = __mul__


def fake_torch(graph_capture_works):
    torch = types.ModuleType("torch")
    torch.__version__ = "fake"
    torch.version = types.SimpleNamespace(cuda="fake")
    torch.bfloat16, torch.float16, torch.float32, torch.uint8 = "bf16", "fp16", "fp32", "u8"
    torch.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)))
    def make(*shape, **kw):
        if STATE["capturing"]:
            raise RuntimeError("allocation during graph capture (stand-in)")
        return FakeTensor(*shape)

    torch.randn = torch.empty = torch.ones = torch.zeros = torch.arange = make
    torch.empty_like = torch.ones_like = lambda t, **kw: FakeTensor(*t.shape)
    def matmul(a, b, out=None):
        (m, k), n = a.shape, b.shape[1]
        STATE["ms"] = ITERATIONS * 2.0 * m * n * k / 400e12 * 1e3
        return out if out is not None else FakeTensor(m, n)

    torch.matmul = matmul
    def mul(a, scale, out=None):  # the memory check's kernel: 2 bytes an element, read and written
        STATE["ms"] = ITERATIONS * 2.0 * 2 * a.shape[0] / 3000e9 * 1e3
        return out

    torch.mul = mul
    torch.bmm = lambda a, b: FakeTensor()  # untimed: the layer's time is its attention's
    torch.rsqrt = lambda t: t

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def elapsed_time(self, other):
            return STATE["ms"]

    class Graph:
        def replay(self):
            pass

    @contextlib.contextmanager
    def graph(g):
        if not graph_capture_works:
            raise RuntimeError("capture not supported (stand-in)")
        STATE["capturing"] = True
        try:
            yield
        finally:
            STATE["capturing"] = False

    def synchronize():
        if STATE["capturing"]:
            raise RuntimeError("synchronize during graph capture (stand-in)")

    @contextlib.contextmanager
    def stream(s):
        yield

    cuda = types.SimpleNamespace(
        is_available=lambda: True, get_device_name=lambda: "Stand-in GPU", synchronize=synchronize,
        Event=Event, CUDAGraph=Graph, graph=graph, stream=stream,
        Stream=lambda: types.SimpleNamespace(wait_stream=lambda s: None),
        current_stream=lambda: types.SimpleNamespace(wait_stream=lambda s: None))
    torch.cuda = cuda
    functional = types.ModuleType("torch.nn.functional")
    def attention(q, k, v, is_causal=False):
        STATE["ms"] = ITERATIONS * 100.0
        return FakeTensor()

    functional.scaled_dot_product_attention = attention
    functional.silu = functional.softmax = lambda t, dim=-1: t
    functional.one_hot = lambda t, n: FakeTensor()
    torch.nn = types.SimpleNamespace(functional=functional)
    torch.autograd = types.SimpleNamespace(grad=lambda out, inputs, grad: [FakeTensor() for _ in inputs])
    return torch, functional


def run_script(out, graph_capture_works):
    torch, functional = fake_torch(graph_capture_works)
    sys.modules["torch"] = torch
    sys.modules["torch.nn"] = torch.nn
    sys.modules["torch.nn.functional"] = functional
    here = os.path.dirname(os.path.abspath(__file__))
    sys.argv = ["calibrate_compute.py", "--device", "h200", "--out", out, "--quick", "--repeats", "2"]
    code = compile(open(os.path.join(here, "calibrate_compute.py")).read(), "calibrate_compute.py", "exec")
    exec(code, {"__name__": "__main__"})


def main():
    ddlsim, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    for capture in (True, False):
        out = os.path.join(out_dir, f"calibration-{'graph' if capture else 'plain'}.json")
        run_script(out, capture)
        doc = json.load(open(out))
        # Expected: the quick grid's GEMMs at 400 TFLOP/s, the memory kernel at 3,000 GB/s, each
        # layer's (dense and mixture-of-experts) forward 100 ms and its backward 200 - 100 ms.
        assert doc["device"] == "h200" and doc["gpu"] == "Stand-in GPU", doc
        assert ("CUDA graphs" in doc["software"]) == capture, doc["software"]
        assert len(doc["gemm"]) > 10, len(doc["gemm"])
        for g in doc["gemm"]:
            assert g["tflops"] == 400.0 and g["dtype"] == "bf16", g
        assert doc["memory"] == {"bytes": 2 << 30, "gbytes_per_s": 3000.0}, doc["memory"]
        assert doc["layer"]["forward_ms"] == 100.0 and doc["layer"]["backward_ms"] == 100.0, doc["layer"]
        moe = doc["moe_layer"]
        assert moe["forward_ms"] == 100.0 and moe["backward_ms"] == 100.0 and moe["experts"] == 8, moe
        r = subprocess.run([ddlsim, "workload", "--compare", out, "--json"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        cmp = json.loads(r.stdout)
        assert len(cmp["gemm"]) == len(doc["gemm"]) and "layer" in cmp and "memory" in cmp, cmp.keys()
        assert cmp["moe_layer"]["experts"] == 8, cmp.keys()
    print("calibrate_compute.py: runs end to end on the stand-in (graph and plain timing); ddlsim accepts its file")


if __name__ == "__main__":
    main()
