// A synthetic layered model: a stack of identical layers described only by their costs.
//
// Stands in for real models (GPT, Llama, VGG, ...) until the operator-graph IR arrives.
// Per device and per training step, each layer's forward pass costs
// `forward_flops` FLOPs, its backward pass `backward_to_forward` times that, it keeps
// `activation_bytes` alive from its forward until its backward, and its backward produces
// `gradient_bytes` of gradients to be all-reduced.
#pragma once

#include <cstdint>

#include "sim/core/units.hpp"

namespace ddlsim {

class JsonObject;

struct SyntheticModel {
  std::int64_t layers = 0;
  Flops forward_flops{0.0};       // per layer, per device, per step
  double backward_to_forward = 2.0;
  Bytes gradient_bytes{0.0};      // per layer
  Bytes activation_bytes{0.0};    // per layer, per device
};

/// Reads the scenario's "workload" object whose "model" is "synthetic".
SyntheticModel read_synthetic_model(JsonObject& workload);

}  // namespace ddlsim
