// The operator-graph IR: a model as operators over named tensors with logical shapes.
//
// Every operator carries its costs for one training step of the batch its input shapes
// describe (an OpCost): forward and backward FLOPs, bytes it reads and writes in each
// pass, the parameters it owns, and the activation bytes it keeps from its forward for
// its backward. Conventions:
//  - a multiply-add is 2 FLOPs; a matmul (m x k)(k x n) is 2mkn forward and 4mkn backward
//    (the gradients of its input and of its weight);
//  - elementwise and normalisation operators count a small fixed number of FLOPs per
//    element (see each builder function); their time is bound by memory anyway;
//  - bytes are the operator's unavoidable traffic to device memory (each input read once,
//    each output written once), in the tensors' data types;
//  - saved bytes follow Korthikanti et al. ("Reducing Activation Recomputation in Large
//    Transformer Models", 2022): a linear layer keeps its input, a batched matmul both
//    inputs, softmax its output, dropout a 1-byte mask, GeLU its input, layer norm its
//    input; a residual add keeps nothing. A tensor that several operators keep is stored
//    once, and counted on the first of them: a norm's output that feeds two linears
//    (parallel layers), a softmax's output that the context matmul takes without a
//    dropout between them. Views share their tensor's storage; split parts do not
//    overlap.
// Shapes are logical (the whole batch, unsharded); strategies derive per-device shards.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim {

enum class DataType : std::uint8_t { kFp32, kBf16, kFp16, kFp8, kInt64 };
std::string_view data_type_name(DataType t);
/// The floating-point types by name ("fp32", "bf16", "fp16", "fp8"), as users write them.
inline const std::vector<std::string> kFloatTypeNames = {"fp32", "bf16", "fp16", "fp8"};
std::optional<DataType> parse_float_type(std::string_view name);
double data_type_bytes(DataType t);

enum class OpKind : std::uint8_t {
  kLinear,
  kMatmul,          // batched matmul of two activations
  kConv2d,
  kPool,
  kFlashAttention,  // fused attention (scores, softmax, context) that recomputes in backward
  kSoftmax,
  kLayerNorm,
  kRmsNorm,
  kBatchNorm,
  kGelu,
  kRelu,
  kSquaredRelu,     // relu(x)^2 (Nemotron-4's MLP)
  kSwiGlu,
  kEmbedding,
  kDropout,
  kAdd,
  kCrossEntropy,
  kPermute,         // rows gathered into another order (a mixture-of-experts dispatch or combine)
  kConcat,          // tensors joined along their last dimension
};
std::string_view op_kind_name(OpKind k);

using Shape = std::vector<std::int64_t>;
std::int64_t elements(const Shape& s);

struct Tensor {
  std::string name;
  Shape shape;
  DataType dtype;
};

struct OpCost {
  double fwd_flops = 0.0;    // FLOP
  double bwd_flops = 0.0;    // FLOP
  double fwd_bytes = 0.0;    // bytes read and written by the forward pass
  double bwd_bytes = 0.0;    // bytes read and written by the backward pass
  double params = 0.0;       // parameters (count)
  double saved_bytes = 0.0;  // activation bytes kept from forward to backward

  OpCost& operator+=(const OpCost& o);
};

/// The matrix-multiply shape of a GEMM-like operator: `batch` independent (m x k)(k x n)
/// products (zero for others). The compute model's efficiency depends on it.
struct GemmShape {
  std::int64_t batch = 0, m = 0, n = 0, k = 0;
};

struct Operator {
  OpKind kind;
  std::string name;
  int layer = -1;  // index of the repeated block it belongs to, -1 outside them
  std::vector<std::uint32_t> inputs;  // tensor ids
  std::uint32_t output = 0;           // tensor id
  GemmShape gemm;
  DataType dtype = DataType::kBf16;
  OpCost cost;
};

/// A model: tensors and the operators that produce them, in execution order. Builder
/// functions add an operator and return its output tensor's id; they throw
/// std::invalid_argument on shapes that do not fit (a bug in a builder, not user input).
class OperatorGraph {
 public:
  explicit OperatorGraph(std::string name = {}) : name_(std::move(name)) {}

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const std::vector<Tensor>& tensors() const { return tensors_; }
  [[nodiscard]] const std::vector<Operator>& ops() const { return ops_; }
  [[nodiscard]] const Tensor& tensor(std::uint32_t id) const { return tensors_.at(id); }
  [[nodiscard]] OpCost totals() const;

  /// Operators added from now on belong to repeated block `layer` (-1: none).
  void set_layer(int layer) { layer_ = layer; }

  std::uint32_t input(std::string name, Shape shape, DataType dtype);
  /// The same data seen with another shape of as many elements (head split, flatten).
  std::uint32_t view(std::string name, std::uint32_t x, Shape shape);

  /// Views of consecutive parts of x's last dimension (a fused QKV output split into Q,
  /// K and V), costing nothing; the sizes must add up to that dimension.
  std::vector<std::uint32_t> split(const std::string& name, std::uint32_t x, const std::vector<std::int64_t>& sizes);

  /// y = x W (+ b): x [..., k] -> y [..., n]; weights k x n in x's dtype. With
  /// `shared_weight` the weight belongs to another operator (a tied output embedding)
  /// and is not counted again. With `fp8` the GEMM runs in fp8 as Transformer Engine
  /// runs it: the operator's dtype is fp8, the input and the weight are read as 1-byte
  /// copies (the casts assumed fused into the kernels that produce them) and the output
  /// is written in x's dtype; for backward it keeps its input's fp8 copy (1 byte per
  /// element, shared with other fp8 linear layers of the same input, apart from any
  /// operator keeping the tensor itself).
  std::uint32_t linear(std::string name, std::uint32_t x, std::int64_t n, bool bias, bool shared_weight = false,
                       bool fp8 = false);
  /// The linear layers of `x`'s first dimension's groups, each its own weights (a
  /// mixture of experts' experts in one grouped GEMM): x [G, m, k] -> [G, m, n], weights
  /// G x k x n; the GEMM shape is G products of (m x k)(k x n). `fp8` as for linear.
  std::uint32_t grouped_linear(std::string name, std::uint32_t x, std::int64_t n, bool bias, bool fp8 = false);
  /// x [..., h] rows gathered into `shape` (last dimension h): a mixture of experts'
  /// dispatch of each token to its experts (`shape` [experts, rows per expert, h]),
  /// memory-bound, keeping nothing for backward but the indices (not counted). With
  /// `weighted` the combine back: each token's rows summed, weighted by the router's
  /// probabilities (a multiply-add per element read), keeping its input for the
  /// gradient of those probabilities.
  std::uint32_t permute(std::string name, std::uint32_t x, Shape shape, bool weighted);
  /// a [B..., m, k] x b [B..., k, n] (b_transposed: b is [B..., n, k]) -> [B..., m, n].
  std::uint32_t matmul(std::string name, std::uint32_t a, std::uint32_t b, bool b_transposed);
  /// x [N, C, H, W] -> [N, K, P, Q] with K filters of R x R, stride and padding.
  std::uint32_t conv2d(std::string name, std::uint32_t x, std::int64_t filters, std::int64_t kernel,
                       std::int64_t stride, std::int64_t pad, bool bias);
  /// Max or average pooling over R x R windows: [N, C, H, W] -> [N, C, P, Q].
  std::uint32_t pool(std::string name, std::uint32_t x, std::int64_t kernel, std::int64_t stride, std::int64_t pad);
  /// Fused attention over q [B, heads, s, d], k [B, kv_heads, s, d] and v [B, kv_heads,
  /// s, dv] (grouped-query when kv_heads < heads; dv = d but for multi-head latent
  /// attention) -> [B, heads, s, dv]; causal halves the score work.
  /// `key_chunks` > 1: the queries meet key_chunks times the keys, k and v being one
  /// chunk of them and the others' alike (context parallelism: each of a ring's steps
  /// runs a kernel over one chunk; key_chunks times the work, shapes of one chunk).
  std::uint32_t flash_attention(std::string name, std::uint32_t q, std::uint32_t k, std::uint32_t v, bool causal,
                                std::int64_t key_chunks = 1);
  /// The parts joined along their last dimension, a part of size 1 in another dimension
  /// repeated along it (multi-head latent attention's rotary key, shared by the heads,
  /// joined to each head's key): memory-bound, keeping nothing for backward.
  std::uint32_t concat(std::string name, const std::vector<std::uint32_t>& parts);
  std::uint32_t softmax(std::string name, std::uint32_t x);
  std::uint32_t layer_norm(std::string name, std::uint32_t x);
  std::uint32_t rms_norm(std::string name, std::uint32_t x);
  std::uint32_t batch_norm(std::string name, std::uint32_t x);  // over [N, C, H, W]
  std::uint32_t gelu(std::string name, std::uint32_t x);
  std::uint32_t relu(std::string name, std::uint32_t x);
  /// relu(x)^2, one fused elementwise kernel that keeps its input for backward.
  std::uint32_t squared_relu(std::string name, std::uint32_t x);
  /// silu(gate) * up, elementwise.
  std::uint32_t swiglu(std::string name, std::uint32_t gate, std::uint32_t up);
  /// ids [...] (int64) -> [..., hidden] rows of a vocab x hidden table in `dtype`; with
  /// `shared_weight` the table is another operator's (not counted again).
  std::uint32_t embedding(std::string name, std::uint32_t ids, std::int64_t vocab, std::int64_t hidden, DataType dtype,
                          bool shared_weight = false);
  std::uint32_t dropout(std::string name, std::uint32_t x);
  std::uint32_t add(std::string name, std::uint32_t a, std::uint32_t b);
  /// Softmax cross-entropy of logits [..., V] against integer labels: a loss per row.
  std::uint32_t cross_entropy(std::string name, std::uint32_t logits);

 private:
  std::uint32_t add_tensor(std::string name, Shape shape, DataType dtype);
  std::uint32_t add_op(OpKind kind, std::string name, std::vector<std::uint32_t> inputs, Shape out_shape,
                       DataType dtype, OpCost cost, GemmShape gemm = {});
  /// What an elementwise operator keeps for its backward.
  enum class Keeps : std::uint8_t { kInput, kOutput, kMask };
  std::uint32_t elementwise(OpKind kind, std::string name, std::uint32_t x, double flops_per_element, Keeps keeps);
  /// x's bytes the first time an operator keeps x (or a view of it), 0 after.
  double keep(std::uint32_t x);
  /// The bytes of x's fp8 copy (1 per element) the first time an fp8 linear layer keeps
  /// it, 0 after.
  double keep_fp8(std::uint32_t x);

  std::string name_;
  std::vector<Tensor> tensors_;
  std::vector<std::uint32_t> storage_;  // per tensor: the tensor whose storage it is (itself unless a view)
  std::vector<bool> kept_;              // per storage: kept for backward by an operator already
  std::vector<bool> kept_fp8_;          // per storage: its fp8 copy kept by an fp8 linear layer already
  std::vector<Operator> ops_;
  int layer_ = -1;
};

}  // namespace ddlsim
