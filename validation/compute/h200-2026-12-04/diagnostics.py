"""Diagnostics run once on the lent H200 on 2026-12-04 (output: diagnostics.json beside it):
the same GEMMs and memory traffic timed four ways (plain calls with out=, plain calls
allocating, a CUDA graph of 10 calls, 100 plain calls), to see how much of the
calibration run's figures is method. Usage: python3 diagnostics.py OUT.json"""
import torch, sys, json
res = {}
def t_plain(fn, iters=10, reps=5):
    for _ in range(3): fn()
    torch.cuda.synchronize(); ts=[]
    for _ in range(reps):
        s,e=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(iters): fn()
        e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e)/iters)
    ts.sort(); return ts[len(ts)//2]
def t_graph(fn, iters=10, reps=5):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    side=torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side): fn()
    torch.cuda.current_stream().wait_stream(side)
    g=torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters): fn()
    g.replay(); torch.cuda.synchronize(); ts=[]
    for _ in range(reps):
        s,e=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
        s.record(); g.replay(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e)/iters)
    ts.sort(); return ts[len(ts)//2]
for (m,n,k) in [(8192,8192,8192),(4096,4096,4096),(32768,8192,8192),(2048,8192,8192)]:
    a=torch.randn(m,k,device="cuda",dtype=torch.bfloat16); b=torch.randn(k,n,device="cuda",dtype=torch.bfloat16); c=torch.empty(m,n,device="cuda",dtype=torch.bfloat16)
    f=2.0*m*n*k/1e9
    r={"plain_out": f/t_plain(lambda: torch.matmul(a,b,out=c)), "plain_new": f/t_plain(lambda: a@b),
       "graph_out": f/t_graph(lambda: torch.matmul(a,b,out=c)), "plain_out_100": f/t_plain(lambda: torch.matmul(a,b,out=c), iters=100, reps=3)}
    res[f"gemm {m}x{n}x{k} TFLOP/s"]={kk: round(v,1) for kk,v in r.items()}
    print(res, file=sys.stderr, flush=True)
for size in (1<<30, 4<<30):
    a=torch.empty(size,dtype=torch.uint8,device="cuda"); b=torch.empty_like(a)
    af=a.view(torch.bfloat16); bf=b.view(torch.bfloat16)
    gb=2.0*size/1e6
    r={"copy_plain": gb/t_plain(lambda: b.copy_(a)), "copy_graph": gb/t_graph(lambda: b.copy_(a)),
       "mul_plain": gb/t_plain(lambda: torch.mul(af,1.0,out=bf)), "mul_graph": gb/t_graph(lambda: torch.mul(af,1.0,out=bf)),
       "add3_plain": 0.75*gb/t_plain(lambda: torch.add(af[:af.numel()//2],af[af.numel()//2:],out=bf[:af.numel()//2]))}
    res[f"copy {size} GB/s"]={kk: round(v,1) for kk,v in r.items()}
    print(res, file=sys.stderr, flush=True)
    del a,b,af,bf
json.dump(res, open(sys.argv[1],"w"), indent=1)
