#!/usr/bin/env bash
# Reproduces every figure of the README's gallery: runs ddlsim on the bundled scenarios
# (result files under OUT/data), then plots/ddlsim_plots.py on them (OUT/NAME.pdf, .png,
# .svg). Usage: bash scripts/figures.sh [OUT]   (default plots/gallery; about 2 minutes
# on 2 cores). Builds ddlsim first when build/cli/ddlsim is missing; DDLSIM=PATH uses
# another binary. The PNGs in plots/gallery are committed; the rest is ignored by git.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-plots/gallery}
ddlsim=${DDLSIM:-build/cli/ddlsim}
[ -x "$ddlsim" ] || bash scripts/build.sh
data="$out/data"
mkdir -p "$data"
plot() { /usr/bin/python3 plots/ddlsim_plots.py "$@"; }
step() { echo "figures: $*" >&2; }

step "the default scenario (GPT 1.7B on 4 DGX A100): report, links, trace of PTD-P"
"$ddlsim" run --json --links "$data/links.csv" > "$data/default.json"
"$ddlsim" run --strategy ptd-p --trace "$data/ptdp-trace.json" > /dev/null
plot breakdown "$data/default.json" --out "$out/breakdown"
plot memory "$data/default.json" --out "$out/memory"
plot links "$data/links.csv" --top 12 --out "$out/links"
plot timeline "$data/ptdp-trace.json" --out "$out/timeline" --wide

step "bundled scenarios of published comparisons: ZeRO-3 against PTD-P, VGG-16 plans on 25 GbE"
"$ddlsim" run scenarios/megatron-zero3-vs-ptdp.json --json > "$data/zero3-vs-ptdp.json"
"$ddlsim" run scenarios/autoddl-vgg16-single-gpu-nodes.json --json > "$data/vgg16-25gbe.json"
plot breakdown "$data/zero3-vs-ptdp.json" --out "$out/breakdown-zero3-vs-ptdp"
plot breakdown "$data/vgg16-25gbe.json" --out "$out/breakdown-vgg16"

step "scaling: the default scenario on 1 to 32 servers"
"$ddlsim" sweep --vary cluster.nodes=1,2,4,8,16,32 --csv "$data/scaling.csv"
plot scaling "$data/scaling.csv" --x devices --out "$out/scaling"

step "sensitivity of PTD-P's step to the NIC, the GPU, the micro-batch and the network model"
"$ddlsim" sweep --strategy ptd-p --vary cluster.nic=ib-hdr,ib-edr,ib-ndr \
  --vary cluster.accelerator=a100-80gb,a100-40gb,h100-sxm --vary strategies.3.micro_batch=4,2,8 \
  --vary simulation.network=flow,analytical --csv "$data/sensitivity.csv"
plot tornado "$data/sensitivity.csv" --strategy ptd-p --out "$out/tornado"

step "search convergence on the default scenario: grid, autoddl, mcmc (50 proposals)"
"$ddlsim" search --json > "$data/search-grid.json" 2> /dev/null
"$ddlsim" search --method autoddl --json > "$data/search-autoddl.json" 2> /dev/null
"$ddlsim" search --method mcmc --iterations 50 --json > "$data/search-mcmc.json" 2> /dev/null
plot convergence "$data/search-grid.json" "$data/search-autoddl.json" "$data/search-mcmc.json" --logx \
  --out "$out/convergence"

step "accuracy: every validation suite, predicted against measured"
"$ddlsim" validate --csv "$data/validate.csv" > /dev/null
plot accuracy "$data/validate.csv" --unit s --out "$out/accuracy"
plot accuracy "$data/validate.csv" --unit GB/s --out "$out/accuracy-nccl"

step "done: $(ls "$out"/*.png | wc -l) figures in $out"
