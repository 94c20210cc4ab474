#include "workloads/operator_graph.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddlsim {
namespace {

constexpr std::string_view kOpNames[] = {"linear",  "matmul", "conv2d",    "pool",     "flash_attention", "softmax",
                                         "layer_norm", "rms_norm", "batch_norm", "gelu", "relu", "squared_relu", "swiglu",
                                         "embedding", "dropout", "add", "cross_entropy", "permute", "concat"};

[[noreturn]] void bad(const std::string& op, const std::string& what) {
  throw std::invalid_argument("operator '" + op + "': " + what);
}

std::string show(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::string_view data_type_name(DataType t) {
  constexpr std::string_view names[] = {"fp32", "bf16", "fp16", "fp8", "int64"};
  return names[static_cast<int>(t)];
}

std::optional<DataType> parse_float_type(std::string_view name) {
  for (DataType t : {DataType::kFp32, DataType::kBf16, DataType::kFp16, DataType::kFp8}) {
    if (data_type_name(t) == name) return t;
  }
  return std::nullopt;
}

double data_type_bytes(DataType t) {
  constexpr double bytes[] = {4, 2, 2, 1, 8};
  return bytes[static_cast<int>(t)];
}

std::string_view op_kind_name(OpKind k) { return kOpNames[static_cast<int>(k)]; }

std::int64_t elements(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}

OpCost& OpCost::operator+=(const OpCost& o) {
  fwd_flops += o.fwd_flops;
  bwd_flops += o.bwd_flops;
  fwd_bytes += o.fwd_bytes;
  bwd_bytes += o.bwd_bytes;
  params += o.params;
  saved_bytes += o.saved_bytes;
  return *this;
}

OpCost OperatorGraph::totals() const {
  OpCost t;
  for (const Operator& op : ops_) t += op.cost;
  return t;
}

std::uint32_t OperatorGraph::add_tensor(std::string name, Shape shape, DataType dtype) {
  for (std::int64_t d : shape) {
    if (d <= 0) bad(name, "every dimension must be positive, got " + show(shape));
  }
  tensors_.push_back(Tensor{std::move(name), std::move(shape), dtype});
  const auto id = static_cast<std::uint32_t>(tensors_.size() - 1);
  storage_.push_back(id);
  kept_.push_back(false);
  kept_fp8_.push_back(false);
  return id;
}

double OperatorGraph::keep(std::uint32_t x) {
  const std::uint32_t s = storage_.at(x);
  if (kept_[s]) return 0.0;
  kept_[s] = true;
  const Tensor& t = tensors_[x];
  return static_cast<double>(elements(t.shape)) * data_type_bytes(t.dtype);
}

double OperatorGraph::keep_fp8(std::uint32_t x) {
  const std::uint32_t s = storage_.at(x);
  if (kept_fp8_[s]) return 0.0;
  kept_fp8_[s] = true;
  return static_cast<double>(elements(tensors_[x].shape)) * data_type_bytes(DataType::kFp8);
}

std::uint32_t OperatorGraph::add_op(OpKind kind, std::string name, std::vector<std::uint32_t> inputs, Shape out_shape,
                                    DataType dtype, OpCost cost, GemmShape gemm) {
  const std::uint32_t out = add_tensor(name, std::move(out_shape), dtype);
  ops_.push_back(Operator{kind, std::move(name), layer_, std::move(inputs), out, gemm, dtype, cost});
  return out;
}

std::uint32_t OperatorGraph::input(std::string name, Shape shape, DataType dtype) {
  return add_tensor(std::move(name), std::move(shape), dtype);
}

std::uint32_t OperatorGraph::view(std::string name, std::uint32_t x, Shape shape) {
  const Tensor& t = tensor(x);
  if (elements(shape) != elements(t.shape)) bad(name, "a view of " + show(t.shape) + " cannot have shape " + show(shape));
  const std::uint32_t id = add_tensor(std::move(name), std::move(shape), t.dtype);
  storage_[id] = storage_[x];
  return id;
}

std::vector<std::uint32_t> OperatorGraph::split(const std::string& name, std::uint32_t x,
                                                const std::vector<std::int64_t>& sizes) {
  const Tensor t = tensor(x);
  std::int64_t sum = 0;
  for (std::int64_t v : sizes) sum += v;
  if (sum != t.shape.back()) bad(name, "parts do not add up to the last dimension of " + show(t.shape));
  std::vector<std::uint32_t> parts;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Shape s = t.shape;
    s.back() = sizes[i];
    parts.push_back(add_tensor(name + "." + std::to_string(i), std::move(s), t.dtype));
  }
  return parts;
}

std::uint32_t OperatorGraph::linear(std::string name, std::uint32_t x, std::int64_t n, bool bias, bool shared_weight,
                                   bool fp8) {
  const Tensor t = tensor(x);
  const std::int64_t k = t.shape.back();
  const double m = static_cast<double>(elements(t.shape) / k), K = static_cast<double>(k), N = static_cast<double>(n);
  const double B = data_type_bytes(t.dtype), in = fp8 ? data_type_bytes(DataType::kFp8) : B;
  OpCost c;
  c.fwd_flops = 2.0 * m * K * N + (bias ? m * N : 0.0);
  c.bwd_flops = 4.0 * m * K * N + (bias ? m * N : 0.0);
  c.fwd_bytes = (m * K + K * N) * in + m * N * B;
  c.bwd_bytes = 2.0 * c.fwd_bytes;  // two GEMMs (input and weight gradients), each reading two operands
  c.params = (shared_weight ? 0.0 : K * N) + (bias ? N : 0.0);
  c.saved_bytes = fp8 ? keep_fp8(x) : keep(x);  // the input, for the weight gradient
  Shape out = t.shape;
  out.back() = n;
  const std::uint32_t y = add_op(OpKind::kLinear, std::move(name), {x}, std::move(out), t.dtype, c,
                                 GemmShape{1, elements(t.shape) / k, n, k});
  if (fp8) ops_.back().dtype = DataType::kFp8;
  return y;
}

std::uint32_t OperatorGraph::grouped_linear(std::string name, std::uint32_t x, std::int64_t n, bool bias, bool fp8) {
  const Tensor t = tensor(x);
  if (t.shape.size() != 3) bad(name, "expects [groups, m, k], got " + show(t.shape));
  const std::int64_t groups = t.shape[0], rows = t.shape[1], k = t.shape[2];
  const double G = static_cast<double>(groups), m = static_cast<double>(groups * rows), K = static_cast<double>(k),
               N = static_cast<double>(n);
  const double B = data_type_bytes(t.dtype), in = fp8 ? data_type_bytes(DataType::kFp8) : B;
  OpCost c;
  c.fwd_flops = 2.0 * m * K * N + (bias ? m * N : 0.0);
  c.bwd_flops = 4.0 * m * K * N + (bias ? m * N : 0.0);
  c.fwd_bytes = (m * K + G * K * N) * in + m * N * B;
  c.bwd_bytes = 2.0 * c.fwd_bytes;
  c.params = G * (K * N + (bias ? N : 0.0));
  c.saved_bytes = fp8 ? keep_fp8(x) : keep(x);
  const std::uint32_t y =
      add_op(OpKind::kLinear, std::move(name), {x}, Shape{groups, rows, n}, t.dtype, c, GemmShape{groups, rows, n, k});
  if (fp8) ops_.back().dtype = DataType::kFp8;
  return y;
}

std::uint32_t OperatorGraph::permute(std::string name, std::uint32_t x, Shape shape, bool weighted) {
  const Tensor t = tensor(x);
  if (shape.empty() || shape.back() != t.shape.back()) bad(name, "rows of " + show(t.shape) + " cannot form " + show(shape));
  const double in = static_cast<double>(elements(t.shape)), out = static_cast<double>(elements(shape));
  const double B = data_type_bytes(t.dtype);
  OpCost c;
  c.fwd_flops = weighted ? 2.0 * in : 0.0;
  c.bwd_flops = weighted ? 2.0 * in : 0.0;
  // Forward: the rows read (as many as written for a dispatch, every one for a combine)
  // and written; backward the same moved the other way.
  c.fwd_bytes = (weighted ? in + out : 2.0 * out) * B;
  c.bwd_bytes = c.fwd_bytes + (weighted ? in * B : 0.0);  // the combine's gradient also reads its input
  c.saved_bytes = weighted ? keep(x) : 0.0;
  return add_op(OpKind::kPermute, std::move(name), {x}, std::move(shape), t.dtype, c);
}

std::uint32_t OperatorGraph::matmul(std::string name, std::uint32_t a, std::uint32_t b, bool b_transposed) {
  const Tensor ta = tensor(a), tb = tensor(b);
  if (ta.shape.size() < 2 || tb.shape.size() != ta.shape.size()) bad(name, "needs two operands of the same rank >= 2");
  const std::size_t r = ta.shape.size();
  const std::int64_t m = ta.shape[r - 2], k = ta.shape[r - 1];
  const std::int64_t kb = b_transposed ? tb.shape[r - 1] : tb.shape[r - 2];
  const std::int64_t n = b_transposed ? tb.shape[r - 2] : tb.shape[r - 1];
  if (kb != k) bad(name, "inner dimensions differ: " + show(ta.shape) + " x " + show(tb.shape));
  const std::int64_t batch = elements(ta.shape) / (m * k), batch_b = elements(tb.shape) / (k * n);
  if (batch_b <= 0 || batch % batch_b != 0) bad(name, "batch dimensions do not broadcast: " + show(ta.shape) + " x " + show(tb.shape));
  const double Bt = data_type_bytes(ta.dtype);
  const double mk = static_cast<double>(batch * m * k), kn = static_cast<double>(batch_b * k * n),
               mn = static_cast<double>(batch * m * n);
  OpCost c;
  c.fwd_flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m * n) * static_cast<double>(k);
  c.bwd_flops = 2.0 * c.fwd_flops;
  c.fwd_bytes = (mk + kn + mn) * Bt;
  c.bwd_bytes = 2.0 * c.fwd_bytes;
  c.saved_bytes = keep(a) + keep(b);  // both operands
  Shape out = ta.shape;
  out[r - 1] = n;
  return add_op(OpKind::kMatmul, std::move(name), {a, b}, std::move(out), ta.dtype, c, GemmShape{batch, m, n, k});
}

std::uint32_t OperatorGraph::conv2d(std::string name, std::uint32_t x, std::int64_t filters, std::int64_t kernel,
                                    std::int64_t stride, std::int64_t pad, bool bias) {
  const Tensor t = tensor(x);
  if (t.shape.size() != 4) bad(name, "expects [N, C, H, W], got " + show(t.shape));
  const std::int64_t N = t.shape[0], C = t.shape[1], H = t.shape[2], W = t.shape[3];
  const std::int64_t P = (H + 2 * pad - kernel) / stride + 1, Q = (W + 2 * pad - kernel) / stride + 1;
  if (P <= 0 || Q <= 0) bad(name, "the kernel does not fit the input");
  const double macs = static_cast<double>(N * filters * P * Q) * static_cast<double>(C * kernel * kernel);
  const double out_elems = static_cast<double>(N * filters * P * Q);
  const double Bt = data_type_bytes(t.dtype);
  const double weights = static_cast<double>(filters * C * kernel * kernel);
  OpCost c;
  c.fwd_flops = 2.0 * macs + (bias ? out_elems : 0.0);
  c.bwd_flops = 4.0 * macs + (bias ? out_elems : 0.0);
  c.fwd_bytes = (static_cast<double>(elements(t.shape)) + weights + out_elems) * Bt;
  c.bwd_bytes = 2.0 * c.fwd_bytes;
  c.params = weights + (bias ? static_cast<double>(filters) : 0.0);
  c.saved_bytes = keep(x);
  // As an implicit GEMM: (N P Q) x (C R R) times (C R R) x K.
  return add_op(OpKind::kConv2d, std::move(name), {x}, Shape{N, filters, P, Q}, t.dtype, c,
                GemmShape{1, N * P * Q, filters, C * kernel * kernel});
}

std::uint32_t OperatorGraph::pool(std::string name, std::uint32_t x, std::int64_t kernel, std::int64_t stride,
                                  std::int64_t pad) {
  const Tensor t = tensor(x);
  if (t.shape.size() != 4) bad(name, "expects [N, C, H, W], got " + show(t.shape));
  const std::int64_t P = (t.shape[2] + 2 * pad - kernel) / stride + 1, Q = (t.shape[3] + 2 * pad - kernel) / stride + 1;
  if (P <= 0 || Q <= 0) bad(name, "the window does not fit the input");
  const Shape out{t.shape[0], t.shape[1], P, Q};
  const double in_e = static_cast<double>(elements(t.shape)), out_e = static_cast<double>(elements(out));
  const double Bt = data_type_bytes(t.dtype);
  OpCost c;
  c.fwd_flops = out_e * static_cast<double>(kernel * kernel);
  c.bwd_flops = in_e;
  c.fwd_bytes = (in_e + out_e) * Bt;
  c.bwd_bytes = (in_e + out_e) * Bt;
  c.saved_bytes = keep(x);
  return add_op(OpKind::kPool, std::move(name), {x}, out, t.dtype, c);
}

std::uint32_t OperatorGraph::flash_attention(std::string name, std::uint32_t q, std::uint32_t k, std::uint32_t v,
                                             bool causal, std::int64_t key_chunks) {
  const Tensor tq = tensor(q), tk = tensor(k), tv = tensor(v);
  if (tq.shape.size() != 4 || tk.shape.size() != 4 || tv.shape.size() != 4) {
    bad(name, "expects q, k [B, h, s, d] and v [B, g, s, dv]");
  }
  const std::int64_t B = tq.shape[0], heads = tq.shape[1], s = tq.shape[2], d = tq.shape[3], dv = tv.shape[3];
  if (tk.shape[0] != B || tk.shape[2] != s || tk.shape[3] != d || heads % tk.shape[1] != 0 || tv.shape[0] != B ||
      tv.shape[1] != tk.shape[1] || tv.shape[2] != s) {
    bad(name, "k " + show(tk.shape) + " and v " + show(tv.shape) + " do not match q " + show(tq.shape));
  }
  const double Bt = data_type_bytes(tq.dtype);
  const double qe = static_cast<double>(elements(tq.shape)), ke = static_cast<double>(elements(tk.shape)),
               ve = static_cast<double>(elements(tv.shape)), oe = static_cast<double>(B * heads * s * dv);
  OpCost c;
  // Per head, the scores (s x d)(d x s) and the context (s x s)(s x dv); causal masking
  // skips half.
  c.fwd_flops = 2.0 * static_cast<double>(B * heads) * static_cast<double>(s) * static_cast<double>(s) *
                static_cast<double>(d + dv) * (causal ? 0.5 : 1.0) * static_cast<double>(key_chunks);
  // FlashAttention-2's backward: the scores recomputed and the gradients of the
  // probabilities and of Q and K (s x s x d each), of V (s x s x dv) and of the
  // probabilities through V (s x s x dv): 2.5 x the forward when dv = d.
  c.bwd_flops = c.fwd_flops * static_cast<double>(3 * d + 2 * dv) / static_cast<double>(d + dv);
  c.fwd_bytes = (qe + (ke + ve) * static_cast<double>(key_chunks) + oe) * Bt;  // read q, k, v; write the output
  c.bwd_bytes = 2.0 * c.fwd_bytes;
  // q, k, v and the output, plus one fp32 log-sum-exp per row.
  c.saved_bytes = keep(q) + keep(k) + keep(v) + oe * Bt + static_cast<double>(B * heads * s) * 4.0;
  // As a GEMM: the two products' mean inner size (d when dv = d).
  const std::uint32_t out = add_op(OpKind::kFlashAttention, std::move(name), {q, k, v}, Shape{B, heads, s, dv}, tq.dtype, c,
                                   GemmShape{B * heads, s, s, (d + dv) / 2});
  kept_[out] = true;
  return out;
}

std::uint32_t OperatorGraph::concat(std::string name, const std::vector<std::uint32_t>& parts) {
  if (parts.empty()) bad(name, "needs at least one part");
  Shape out = tensor(parts.front()).shape;
  out.back() = 0;
  double read = 0.0;
  for (std::uint32_t x : parts) {
    const Tensor& t = tensor(x);
    if (t.shape.size() != out.size()) bad(name, "parts of different ranks: " + show(t.shape) + ", " + show(out));
    for (std::size_t i = 0; i + 1 < out.size(); ++i) {
      if (t.shape[i] != out[i] && t.shape[i] != 1 && out[i] != 1) bad(name, "part " + show(t.shape) + " does not broadcast");
      out[i] = std::max(out[i], t.shape[i]);
    }
    out.back() += t.shape.back();
    read += static_cast<double>(elements(t.shape));
  }
  const Tensor first = tensor(parts.front());
  const double Bt = data_type_bytes(first.dtype);
  OpCost c;
  c.fwd_bytes = (read + static_cast<double>(elements(out))) * Bt;  // read the parts, write the whole
  c.bwd_bytes = c.fwd_bytes;  // read the gradient, write each part's (a broadcast part's summed)
  return add_op(OpKind::kConcat, std::move(name), parts, std::move(out), first.dtype, c);
}

std::uint32_t OperatorGraph::elementwise(OpKind kind, std::string name, std::uint32_t x, double flops_per_element,
                                         Keeps keeps) {
  const Tensor t = tensor(x);
  const double e = static_cast<double>(elements(t.shape));
  const double Bt = data_type_bytes(t.dtype);
  OpCost c;
  c.fwd_flops = flops_per_element * e;
  c.bwd_flops = 2.0 * c.fwd_flops;  // assumed: a backward costs about twice its forward
  c.fwd_bytes = 2.0 * e * Bt;       // read the input, write the output
  c.bwd_bytes = 3.0 * e * Bt;       // read the gradient and what was saved, write the gradient
  c.saved_bytes = keeps == Keeps::kInput ? keep(x) : keeps == Keeps::kOutput ? e * Bt : e;  // a mask: 1 byte each
  const std::uint32_t y = add_op(kind, std::move(name), {x}, t.shape, t.dtype, c);
  if (keeps == Keeps::kOutput) kept_[y] = true;
  return y;
}

// FLOPs per element: softmax 5 (max, subtract, exp, sum, divide); layer norm 7 (mean,
// variance, normalise, scale, shift); RMS norm 4; batch norm 7; GeLU 8 (tanh form);
// ReLU 1; squared ReLU 2 (max, product: Megatron-Core's squared_relu, compiled into one
// kernel); dropout 2 (compare, scale).
std::uint32_t OperatorGraph::softmax(std::string name, std::uint32_t x) {
  return elementwise(OpKind::kSoftmax, std::move(name), x, 5.0, Keeps::kOutput);
}

std::uint32_t OperatorGraph::layer_norm(std::string name, std::uint32_t x) {
  const std::uint32_t y = elementwise(OpKind::kLayerNorm, std::move(name), x, 7.0, Keeps::kInput);
  ops_.back().cost.params = 2.0 * static_cast<double>(tensor(x).shape.back());  // scale and shift
  return y;
}

std::uint32_t OperatorGraph::rms_norm(std::string name, std::uint32_t x) {
  const std::uint32_t y = elementwise(OpKind::kRmsNorm, std::move(name), x, 4.0, Keeps::kInput);
  ops_.back().cost.params = static_cast<double>(tensor(x).shape.back());  // scale
  return y;
}

std::uint32_t OperatorGraph::batch_norm(std::string name, std::uint32_t x) {
  const Tensor t = tensor(x);
  if (t.shape.size() != 4) bad(name, "expects [N, C, H, W], got " + show(t.shape));
  const std::uint32_t y = elementwise(OpKind::kBatchNorm, std::move(name), x, 7.0, Keeps::kInput);
  ops_.back().cost.params = 2.0 * static_cast<double>(t.shape[1]);  // scale and shift per channel
  return y;
}

std::uint32_t OperatorGraph::gelu(std::string name, std::uint32_t x) {
  return elementwise(OpKind::kGelu, std::move(name), x, 8.0, Keeps::kInput);
}

std::uint32_t OperatorGraph::relu(std::string name, std::uint32_t x) {
  return elementwise(OpKind::kRelu, std::move(name), x, 1.0, Keeps::kInput);
}

std::uint32_t OperatorGraph::squared_relu(std::string name, std::uint32_t x) {
  return elementwise(OpKind::kSquaredRelu, std::move(name), x, 2.0, Keeps::kInput);
}

std::uint32_t OperatorGraph::dropout(std::string name, std::uint32_t x) {
  return elementwise(OpKind::kDropout, std::move(name), x, 2.0, Keeps::kMask);
}

std::uint32_t OperatorGraph::swiglu(std::string name, std::uint32_t gate, std::uint32_t up) {
  const Tensor tg = tensor(gate), tu = tensor(up);
  if (tg.shape != tu.shape) bad(name, "gate " + show(tg.shape) + " and up " + show(tu.shape) + " differ");
  const double e = static_cast<double>(elements(tg.shape));
  const double Bt = data_type_bytes(tg.dtype);
  OpCost c;
  c.fwd_flops = 5.0 * e;  // silu (negate, exp, add, divide) and the product
  c.bwd_flops = 2.0 * c.fwd_flops;
  c.fwd_bytes = 3.0 * e * Bt;
  c.bwd_bytes = 5.0 * e * Bt;
  c.saved_bytes = keep(gate) + keep(up);  // both inputs
  return add_op(OpKind::kSwiGlu, std::move(name), {gate, up}, tg.shape, tg.dtype, c);
}

std::uint32_t OperatorGraph::embedding(std::string name, std::uint32_t ids, std::int64_t vocab, std::int64_t hidden,
                                       DataType dtype, bool shared_weight) {
  const Tensor t = tensor(ids);
  const double rows = static_cast<double>(elements(t.shape));
  const double Bt = data_type_bytes(dtype);
  OpCost c;
  c.fwd_bytes = rows * 8.0 + rows * static_cast<double>(hidden) * Bt;  // read ids, gather rows
  c.bwd_bytes = 2.0 * rows * static_cast<double>(hidden) * Bt;         // scatter-add the gradients
  c.params = shared_weight ? 0.0 : static_cast<double>(vocab) * static_cast<double>(hidden);
  c.saved_bytes = rows * 8.0;  // the ids
  Shape out = t.shape;
  out.push_back(hidden);
  return add_op(OpKind::kEmbedding, std::move(name), {ids}, std::move(out), dtype, c);
}

std::uint32_t OperatorGraph::add(std::string name, std::uint32_t a, std::uint32_t b) {
  const Tensor ta = tensor(a), tb = tensor(b);
  if (ta.shape != tb.shape) bad(name, "operands " + show(ta.shape) + " and " + show(tb.shape) + " differ");
  const double e = static_cast<double>(elements(ta.shape));
  const double Bt = data_type_bytes(ta.dtype);
  OpCost c;
  c.fwd_flops = e;
  c.fwd_bytes = 3.0 * e * Bt;
  c.bwd_bytes = 2.0 * e * Bt;  // the gradient passes to both inputs unchanged
  return add_op(OpKind::kAdd, std::move(name), {a, b}, ta.shape, ta.dtype, c);
}

// As Megatron-LM computes it (vocab_parallel_cross_entropy), a sequence of memory-bound
// kernels over the logits in fp32, not one fused pass. Bytes moved per logit:
//   forward: upcast to fp32 (read Bt, write 4; none when already fp32), max over the
//   vocabulary (read 4), subtract the max (read and write 4), exp (read and write 4), sum
//   (read 4), divide by the sum (read and write 4), keeping that softmax for backward;
//   backward: scale the softmax minus the one-hot by the loss gradient (read and write 4),
//   then the upcast's backward back to the logits' type (read 4, write Bt).
// For bf16 logits that is 38 and 14 bytes per logit, against 2 and 4 for one fused pass.
std::uint32_t OperatorGraph::cross_entropy(std::string name, std::uint32_t logits) {
  const Tensor t = tensor(logits);
  const double e = static_cast<double>(elements(t.shape));
  const double rows = e / static_cast<double>(t.shape.back());
  const double Bt = data_type_bytes(t.dtype);
  const double upcast = Bt < 4.0 ? Bt + 4.0 : 0.0;
  OpCost c;
  c.fwd_flops = 5.0 * e;  // softmax, then the log of the label's probability
  c.bwd_flops = 2.0 * e;  // softmax minus one-hot
  c.fwd_bytes = e * (upcast + 4.0 + 8.0 + 8.0 + 4.0 + 8.0) + rows * 12.0;
  c.bwd_bytes = e * (8.0 + upcast);
  c.saved_bytes = e * 4.0;  // the fp32 softmax
  Shape out(t.shape.begin(), t.shape.end() - 1);
  return add_op(OpKind::kCrossEntropy, std::move(name), {logits}, std::move(out), DataType::kFp32, c);
}

}  // namespace ddlsim
