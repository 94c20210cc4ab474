#include "workloads/hf_config.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"

namespace ddlsim {
namespace {

// Fields that do not change the cost of a training step.
const char* const kIgnorable[] = {
    "_name_or_path", "architectures", "auto_map", "bos_token_id", "eos_token_id", "pad_token_id",
    "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta", "rope_scaling",
    "torch_dtype", "transformers_version", "use_cache", "pretraining_tp", "tokenizer_class", "id2label",
    "label2id", "task_specific_params", "summary_activation", "summary_first_dropout", "summary_proj_to_labels",
    "summary_type", "summary_use_proj", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", "n_ctx", "max_window_layers", "use_sliding_window", "hidden_dropout", "output_attentions", "output_hidden_states",
    "return_dict", "is_decoder", "tie_encoder_decoder", "bad_words_ids", "chunk_size_feed_forward"};

// Fields that name features the cost model does not have.
const char* const kMixtureOfExperts[] = {"num_local_experts", "num_experts", "num_experts_per_tok", "n_routed_experts",
                                         "moe_intermediate_size", "shared_expert_intermediate_size",
                                         "router_aux_loss_coef", "output_router_logits", "decoder_sparse_step",
                                         "n_shared_experts", "moe_layer_freq", "first_k_dense_replace"};

// A count that may be 0 (a whole number from 0 to `most`), or `absent` where the key is
// absent (the configuration class's default).
std::int64_t count_or(JsonObject& o, const nlohmann::json& doc, const std::string& key, std::int64_t most,
                      std::int64_t absent) {
  o.known(key);
  if (!doc.contains(key)) return absent;
  const nlohmann::json& v = doc[key];
  const double d = v.is_number() ? v.get<double>() : -1.0;
  if (!(d >= 0.0 && d <= static_cast<double>(most)) || d != static_cast<double>(static_cast<std::int64_t>(d))) {
    throw InputError(o.field_path(key) + ": expected a whole number from 0 to " + std::to_string(most) + ", got " + v.dump());
  }
  return static_cast<std::int64_t>(d);
}

}  // namespace

TransformerConfig read_hf_config(const nlohmann::json& doc, const std::string& source, std::optional<std::int64_t> seq,
                                 const std::string& seq_field) {
  // The sequence length is the caller's option, not the file's: its errors name the option.
  if (seq && (*seq <= 0 || *seq > 10'000'000)) {
    throw InputError(seq_field + ": expected 1 to 10000000, got " + std::to_string(*seq));
  }
  TransformerConfig c;
  try {
    JsonObject o(doc, "");
    for (const char* k : kIgnorable) o.known(k);
    const std::vector<std::string> types{"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "glm4_moe", "deepseek_v3", "kimi_k2", "nemotron", "gpt2"};
    const std::string type = o.choice("model_type", types);
    const bool moe = type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe" || type == "glm4_moe" || type == "deepseek_v3" ||
                     type == "kimi_k2";
    // DeepSeek-V3 and R1; Kimi K2, whose config names its own type for DeepSeek-V3's model.
    const bool deepseek = type == "deepseek_v3" || type == "kimi_k2";
    for (const char* k : kMixtureOfExperts) {
      if (o.has(k) && !moe) {
        throw InputError(o.field_path(k) +
                         ": mixture-of-experts layers are modelled for model_type mixtral, qwen2_moe, qwen3_moe, glm4_moe, deepseek_v3 and kimi_k2, not " +
                         type);
      }
    }
    c.name = doc.contains("_name_or_path") && doc["_name_or_path"].is_string() && !doc["_name_or_path"].get<std::string>().empty()
                 ? doc["_name_or_path"].get<std::string>()
                 : type;
    if (type == "gpt2") {
      const std::int64_t h = o.positive_int("n_embd");
      c = gpt_config(c.name, o.positive_int("n_layer"), h, o.positive_int("n_head"), o.positive_int("n_positions"),
                     o.positive_int("vocab_size"));
      if (doc.contains("n_inner") && !doc["n_inner"].is_null()) c.ffn = o.positive_int("n_inner");
      else o.known("n_inner");
      if (o.has("activation_function")) {
        o.choice("activation_function", {"gelu_new", "gelu", "gelu_fast", "gelu_pytorch_tanh"});
      }
      c.tied_embedding = o.boolean_or("tie_word_embeddings", true);
      // Dropout probabilities, GPT2Config's defaults 0.1: a layer whose is 0 is left out
      // (no mask kept, no pass over the tensor).
      c.embedding_dropout = o.number_or("embd_pdrop", 0.0, 1.0, 0.1) > 0;
      c.attention_dropout = o.number_or("attn_pdrop", 0.0, 1.0, 0.1) > 0;
      c.residual_dropout = o.number_or("resid_pdrop", 0.0, 1.0, 0.1) > 0;
    } else {
      const std::int64_t heads = o.positive_int("num_attention_heads");
      // (Multi-head latent attention has a key and value per head, whatever
      // num_key_value_heads says.)
      const std::int64_t kv_heads = o.has("num_key_value_heads") ? o.positive_int("num_key_value_heads") : heads;
      c = llama_config(c.name, o.positive_int("num_hidden_layers"), o.positive_int("hidden_size"), heads, deepseek ? heads : kv_heads,
                       o.positive_int("intermediate_size"), o.positive_int("max_position_embeddings"),
                       o.positive_int("vocab_size"));
      c.tied_embedding = o.boolean_or("tie_word_embeddings", false);
      if (type == "nemotron") {
        // NemotronForCausalLM (Nemotron-4, Minitron): a layer norm (NemotronLayerNorm1P,
        // a scale and a shift) and a non-gated MLP, up_proj -> relu2 -> down_proj: the
        // GPT family's block with a squared ReLU; rotary positions on
        // partial_rotary_factor of each head (not priced, as rotary positions are not).
        c.family = TransformerConfig::Family::kGpt;
        c.squared_relu = true;
        for (const char* k : {"norm_eps", "partial_rotary_factor"}) o.known(k);
      }
      if (moe) {
        // Mixtral: every layer's MLP is experts of intermediate_size each. The Qwen MoEs
        // and GLM-4.5: experts of moe_intermediate_size, and dense MLPs of
        // intermediate_size in the layers that are not mixtures of experts.
        c.experts = o.positive_int(type == "mixtral"                       ? "num_local_experts"
                                   : type == "glm4_moe" || deepseek ? "n_routed_experts"
                                                                    : "num_experts");
        c.experts_per_token = o.positive_int("num_experts_per_tok");
        if (type != "mixtral") {
          // (transformer_problem's limit on the layers first: a flag per layer follows.)
          if (c.layers > 100'000) throw InputError("layers must be at most 100000, got " + std::to_string(c.layers));
          c.dense_ffn = c.ffn;
          c.ffn = o.positive_int("moe_intermediate_size");
          o.known("norm_topk_prob");
          c.dense_layers.assign(static_cast<std::size_t>(c.layers), false);
        }
        if (type == "qwen2_moe" || type == "qwen3_moe") {
          if (type == "qwen2_moe") {
            // A gated shared expert beside the routed ones (Qwen2MoeSparseMoeBlock); 0: none.
            c.shared_ffn = o.number_or("shared_expert_intermediate_size", 0.0, 1e7, 0.0) > 0
                               ? o.positive_int("shared_expert_intermediate_size")
                               : 0;
            c.shared_gate = c.shared_ffn > 0;
          }
          // Layer l is a mixture of experts when l + 1 is a multiple of
          // decoder_sparse_step (1 when absent) and l is not in mlp_only_layers
          // (Qwen2MoeDecoderLayer).
          const std::int64_t step = o.positive_int_or("decoder_sparse_step", 1);
          for (std::int64_t l = 0; l < c.layers; ++l) c.dense_layers[static_cast<std::size_t>(l)] = (l + 1) % step != 0;
          o.known("mlp_only_layers");
          if (o.has("mlp_only_layers") && !doc["mlp_only_layers"].is_null()) {  // null: none, as Qwen2MoeConfig takes it
            const std::int64_t last = std::min<std::int64_t>(c.layers - 1, 1'000'000);
            for (int l : o.array("mlp_only_layers").ints(0, static_cast<int>(last), "a layer index from 0 to " + std::to_string(last))) {
              c.dense_layers[static_cast<std::size_t>(l)] = true;
            }
          }
        }
        if (type == "glm4_moe" || deepseek) {
          // Glm4MoeDecoderLayer: the first first_k_dense_replace layers dense; beside the
          // routed experts, n_shared_experts' MLPs as one shared expert of
          // n_shared_experts x moe_intermediate_size, ungated (Glm4MoeMoE); absent keys
          // take Glm4MoeConfig's defaults (1 and 1), DeepseekV3Config's (3 and 1).
          // DeepSeek's own modelling code also makes a layer past them dense unless its
          // index is a multiple of moe_layer_freq (1 when absent). The router
          // scores by sigmoid with a per-expert bias, within groups (n_group,
          // topk_group): a few elementwise passes over tokens x experts, not priced apart.
          const std::int64_t first_dense = count_or(o, doc, "first_k_dense_replace", c.layers, deepseek ? 3 : 1);
          for (std::int64_t l = 0; l < first_dense; ++l) c.dense_layers[static_cast<std::size_t>(l)] = true;
          if (deepseek) {
            const std::int64_t freq = o.positive_int_or("moe_layer_freq", 1);
            for (std::int64_t l = 0; l < c.layers; ++l) {
              if (l % freq != 0) c.dense_layers[static_cast<std::size_t>(l)] = true;
            }
            if (first_dense < c.layers && std::find(c.dense_layers.begin(), c.dense_layers.end(), false) == c.dense_layers.end()) {
              throw InputError(o.field_path("moe_layer_freq") + ": leaves no mixture-of-experts layer among layers " +
                               std::to_string(first_dense) + " to " + std::to_string(c.layers - 1) +
                               " (a layer past first_k_dense_replace is one when its index is a multiple of it)");
            }
          }
          c.shared_ffn = count_or(o, doc, "n_shared_experts", 1'000, 1) * c.ffn;
          // Group-limited routing: n_group groups of experts, each token's experts within
          // topk_group of them (absent: DeepseekV3Config's 8 and 4, Glm4MoeConfig's 1 and 1).
          c.expert_groups = o.positive_int_or("n_group", deepseek ? 8 : 1);
          c.groups_per_token = o.positive_int_or("topk_group", deepseek ? 4 : 1);
          const auto absent = [&](const char* key) { return doc.contains(key) ? std::string() : std::string(" (absent: the default)"); };
          if (c.experts % c.expert_groups != 0) {
            throw InputError(o.field_path("n_group") + absent("n_group") + ": " + std::to_string(c.expert_groups) +
                             " groups do not divide the " + std::to_string(c.experts) + " routed experts");
          }
          if (c.groups_per_token > c.expert_groups) {
            throw InputError(o.field_path("topk_group") + absent("topk_group") + ": must be at most n_group (" +
                             std::to_string(c.expert_groups) + "), got " + std::to_string(c.groups_per_token));
          }
          if (c.experts_per_token > c.groups_per_token * (c.experts / c.expert_groups)) {
            throw InputError(o.field_path("num_experts_per_tok") + ": " + std::to_string(c.experts_per_token) +
                             " experts do not fit in topk_group (" + std::to_string(c.groups_per_token) + ") groups of " +
                             std::to_string(c.experts / c.expert_groups));
          }
          for (const char* k : {"routed_scaling_factor", "topk_method", "scoring_func",
                                "partial_rotary_factor", "aux_loss_alpha", "seq_aux", "ep_size"}) {
            o.known(k);
          }
          // Multi-token prediction modules (DeepSeek-V3's and GLM-4.5's one), trained with the model.
          c.mtp_layers = count_or(o, doc, "num_nextn_predict_layers", 16, 0);
        }
        if (std::find(c.dense_layers.begin(), c.dense_layers.end(), false) == c.dense_layers.end() && type != "mixtral") {
          const std::string field = type == "glm4_moe" || deepseek                       ? "first_k_dense_replace"
                                    : o.positive_int_or("decoder_sparse_step", 1) > 1 ? "decoder_sparse_step"
                                                                                      : "mlp_only_layers";
          const std::string absent = deepseek ? " (absent: DeepseekV3Config's default, 3)" : " (absent: Glm4MoeConfig's default, 1)";
          throw InputError(o.field_path(field) + (doc.contains(field) ? "" : absent) +
                           ": leaves no mixture-of-experts layer among the " + std::to_string(c.layers) +
                           (c.layers == 1 ? " layer" : " layers"));
        }
        if (std::find(c.dense_layers.begin(), c.dense_layers.end(), true) == c.dense_layers.end()) {
          c.dense_layers.clear();  // every layer a mixture of experts
          c.dense_ffn = 0;
        }
        o.known("router_aux_loss_coef");
        o.known("output_router_logits");
        o.known("router_jitter_noise");
      }
      // The only dropout these models have, on the attention probabilities (default 0).
      c.attention_dropout = o.number_or("attention_dropout", 0.0, 1.0, 0.0) > 0;
      if (o.has("hidden_act")) o.choice("hidden_act", {type == "nemotron" ? "relu2" : "silu"});
      if (deepseek) {
        // Multi-head latent attention (DeepseekV3Attention): no query latent where
        // q_lora_rank is null (DeepSeek-V2-Lite's form). DeepseekV3Config's head_dim is
        // the rotary size, read from qk_rope_head_dim here.
        if (!o.has("q_lora_rank")) throw InputError(o.field_path("q_lora_rank") + ": missing (a required field; null: no query latent)");
        if (!o.has("qk_rope_head_dim")) throw InputError(o.field_path("qk_rope_head_dim") + ": missing (a required field)");
        o.known("q_lora_rank");
        c.q_lora_rank = doc["q_lora_rank"].is_null() ? 0 : o.positive_int("q_lora_rank");
        c.kv_lora_rank = o.positive_int("kv_lora_rank");
        c.qk_nope_dim = o.positive_int("qk_nope_head_dim");
        c.qk_rope_dim = count_or(o, doc, "qk_rope_head_dim", 100'000, 0);
        c.v_head_dim = o.positive_int("v_head_dim");
        // (Named here by their keys: transformer_problem's limits would name its fields.)
        const std::tuple<const char*, std::int64_t, std::int64_t> limits[] = {
            {"q_lora_rank", c.q_lora_rank, 1'000'000}, {"kv_lora_rank", c.kv_lora_rank, 1'000'000},
            {"qk_nope_head_dim", c.qk_nope_dim, 100'000}, {"v_head_dim", c.v_head_dim, 100'000}};
        for (const auto& [key, v, most] : limits) {
          if (v > most) throw InputError(o.field_path(key) + ": must be at most " + std::to_string(most) + ", got " + std::to_string(v));
        }
        o.known("head_dim");
        for (const char* k : {"rope_interleave", "quantization_config"}) o.known(k);
      } else if (o.has("head_dim") && !doc["head_dim"].is_null()) {
        // Heads narrower or wider than hidden_size / heads (Mistral NeMo: 32 x 128 on 5120).
        const std::int64_t d = o.positive_int("head_dim");
        if (d * heads != c.hidden) c.head_size = d;
      } else {
        o.known("head_dim");
      }
      const bool attention_bias = o.boolean_or("attention_bias", false);
      // (DeepSeek's attention_bias: the down projections' and the output projection's.)
      c.qkv_bias = attention_bias || type == "qwen2" || type == "qwen2_moe";  // Qwen2 always has Q, K, V biases
      c.qk_norm = type == "qwen3" || type == "qwen3_moe";                      // Qwen3 norms each query and key head instead
      c.proj_bias = attention_bias && type != "glm4_moe";  // GLM-4.5's attention_bias is Q, K and V's only
      if (type == "glm4_moe") c.qk_norm = o.boolean_or("use_qk_norm", false);
      c.mlp_bias = o.boolean_or("mlp_bias", false);
      o.known("sliding_window");
      const bool sliding = type == "mistral" || type == "mixtral" ||
                           (doc.contains("use_sliding_window") && doc["use_sliding_window"].is_boolean() &&
                            doc["use_sliding_window"].get<bool>());
      // A Mistral config without the key has transformers' MistralConfig default, a
      // window of 4096 tokens (null: none).
      std::optional<std::int64_t> window;
      if (doc.contains("sliding_window") && !doc["sliding_window"].is_null()) window = o.positive_int("sliding_window");
      else if (type == "mistral" && !doc.contains("sliding_window")) window = 4096;
      if (sliding && window) {
        const std::int64_t train_seq = seq.value_or(c.seq);
        if (*window < train_seq) {
          throw InputError(o.field_path("sliding_window") + ": attention over a window of " + std::to_string(*window) +
                           " tokens" + (doc.contains("sliding_window") ? "" : " (MistralConfig's default, the key being absent)") +
                           ", shorter than the sequence of " + std::to_string(train_seq) + ", is not modelled");
        }
      }
    }
    o.finish();
    if (std::string why = transformer_problem(c); !why.empty()) throw InputError(why);
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
  if (seq) {
    if (c.learned_positions && *seq > c.position_rows()) {
      throw InputError(seq_field + ": " + std::to_string(*seq) + " tokens exceed " + source + "'s " + std::to_string(c.position_rows()) +
                       " learned positions (n_positions)");
    }
    c.seq = *seq;
  }
  return c;
}

}  // namespace ddlsim
