// Workload accounting against published figures: each expectation is stated (closed form
// or paper figure) before it is computed.
#include <doctest/doctest.h>

#include "workloads/cnn.hpp"
#include "workloads/transformer.hpp"

using namespace ddlsim;
using doctest::Approx;

namespace {
double macs_forward(const OperatorGraph& g) {
  double m = 0;
  for (const Operator& op : g.ops()) {
    if (op.kind == OpKind::kConv2d || op.kind == OpKind::kLinear) {
      m += static_cast<double>(op.gemm.batch * op.gemm.m) * static_cast<double>(op.gemm.n * op.gemm.k);
    }
  }
  return m;
}
}  // namespace

TEST_CASE("GPT parameters: 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)), plus the final layer norm") {
  // Megatron's count (Narayanan et al. 2021) for GPT-3 175B: l 96, h 12288, s 2048,
  // V 51200; it omits the final layer norm's 2h, which the model has.
  const double l = 96, h = 12288, s = 2048, V = 51200;
  const double expected = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h)) + 2 * h;
  const OperatorGraph g = build_transformer(gpt_config("gpt3-175b", 96, 12288, 96, 2048, 51200), 1);
  CHECK(g.totals().params == Approx(expected).epsilon(1e-12));
  CHECK(g.totals().params == Approx(175e9).epsilon(0.01));
}

TEST_CASE("Llama 3 405B has about 405 billion parameters") {
  // Meta's figure for 126 layers, hidden 16384, FFN 53248, 128 heads, 8 KV heads,
  // vocab 128256 (untied embedding): 405B, within 1%.
  const OperatorGraph g = build_transformer(llama_config("llama3-405b", 126, 16384, 128, 8, 53248, 8192, 128256), 1);
  CHECK(g.totals().params == Approx(405e9).epsilon(0.01));
}

TEST_CASE("training FLOPs per token: 6N + 12 l h s") {
  // Narayanan et al.: a GPT's forward and backward cost 6 FLOPs per matmul parameter per
  // token (N = 12 l h^2 + V h, the output layer included) plus 12 l h s for attention's
  // two s x s matmuls. Norms, softmax and GeLU add well under 1%.
  const double l = 24, h = 2048, s = 2048, V = 51200, b = 4;
  const OperatorGraph g = build_transformer(gpt_config("gpt-1.3b", 24, 2048, 16, 2048, 51200), 4);
  const double per_token = (g.totals().fwd_flops + g.totals().bwd_flops) / (b * s);
  const double N = 12 * l * h * h + V * h;
  CHECK(per_token == Approx(6 * N + 12 * l * h * s).epsilon(0.01));
  CHECK(per_token > 6 * N + 12 * l * h * s);  // the small extras only add
}

TEST_CASE("activation bytes per layer without recomputation: s b h (34 + 5 a s / h)") {
  // Korthikanti et al. 2022, 16-bit activations with 1-byte dropout masks, for every
  // layer of a GPT with plain attention.
  const double s = 1024, b = 2, h = 1024, a = 16;
  const OperatorGraph g = build_transformer(gpt_config("gpt-small", 4, 1024, 16, 1024, 50000), 2);
  std::vector<double> per_layer(4, 0.0);
  for (const Operator& op : g.ops()) {
    if (op.layer >= 0) per_layer[op.layer] += op.cost.saved_bytes;
  }
  for (double bytes : per_layer) CHECK(bytes == Approx(s * b * h * (34 + 5 * a * s / h)).epsilon(1e-12));
}

TEST_CASE("VGG-16: 138M parameters and 15.5 GMACs per 224x224 image") {
  // Simonyan and Zisserman; torchvision lists 138,357,544 parameters and 15.47 GFLOPs
  // (multiply-adds) for one image.
  const OperatorGraph g = build_vgg(16, 1);
  CHECK(g.totals().params == 138357544.0);
  CHECK(macs_forward(g) == Approx(15.5e9).epsilon(0.01));
  // VGG-19: 143,667,240 parameters (torchvision).
  CHECK(build_vgg(19, 1).totals().params == 143667240.0);
}

TEST_CASE("ResNet-50: 25.6M parameters and 4.1 GMACs per 224x224 image") {
  // He et al.; torchvision lists 25,557,032 parameters (batch-norm scale and shift
  // included) and 4.09 GFLOPs (multiply-adds).
  const OperatorGraph g = build_resnet50(1);
  CHECK(g.totals().params == 25557032.0);
  CHECK(macs_forward(g) == Approx(4.1e9).epsilon(0.01));
}

TEST_CASE("an MLP's parameters and FLOPs are its layers'") {
  // 784-512-10 with biases: 784*512 + 512 + 512*10 + 10 parameters; forward 2 b (784*512
  // + 512*10) FLOPs in the matmuls plus the biases and the ReLU.
  const OperatorGraph g = build_mlp({784, 512, 10}, 32);
  CHECK(g.totals().params == 784.0 * 512 + 512 + 512 * 10 + 10);
  double matmul = 0;
  for (const Operator& op : g.ops()) {
    if (op.kind == OpKind::kLinear) matmul += op.cost.fwd_flops;
  }
  CHECK(matmul == 2.0 * 32 * (784 * 512 + 512 * 10) + 32.0 * (512 + 10));
}

TEST_CASE("flash attention keeps far fewer bytes than plain attention and costs more backward FLOPs") {
  // Plain attention keeps 5 a s^2 b bytes of scores per layer; the fused kernel keeps
  // Q, K, V, the output and a log-sum-exp, and recomputes the scores in backward.
  TransformerConfig plain = gpt_config("g", 2, 1024, 16, 2048, 1000);
  TransformerConfig fused = plain;
  fused.flash_attention = true;
  const OpCost p = build_transformer(plain, 1).totals(), f = build_transformer(fused, 1).totals();
  CHECK(f.saved_bytes < p.saved_bytes / 2);
  CHECK(f.bwd_flops / f.fwd_flops > p.bwd_flops / p.fwd_flops * 0.99);
}

TEST_CASE("impossible transformer shapes are named") {
  CHECK(transformer_problem(gpt_config("g", 2, 1000, 16, 128, 100)) == "heads (16) must divide hidden (1000)");
  CHECK(transformer_problem(llama_config("l", 2, 1024, 16, 5, 4096, 128, 100)) == "kv_heads (5) must divide heads (16)");
  CHECK(transformer_problem(gpt_config("g", 0, 1024, 16, 128, 100)) == "layers must be positive, got 0");
}
