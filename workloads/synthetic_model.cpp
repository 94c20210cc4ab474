#include "workloads/synthetic_model.hpp"

#include "support/input_error.hpp"
#include "support/json_reader.hpp"

namespace ddlsim {

SyntheticModel read_synthetic_model(JsonObject& workload) {
  SyntheticModel m;
  workload.choice("model", {"synthetic"});
  m.layers = workload.positive_int("layers");
  if (m.layers > 100'000) {
    throw InputError(workload.field_path("layers") + ": at most 100000 layers, got " + std::to_string(m.layers));
  }
  m.forward_flops = Flops(workload.number("forward_gflop_per_layer", 1e-9, 1e12) * 1e9);
  m.backward_to_forward = workload.number_or("backward_to_forward", 1e-3, 1e3, 2.0);
  m.gradient_bytes = Bytes(workload.number("gradient_mib_per_layer", 0.0, 1e9) * kMiB);
  m.activation_bytes = Bytes(workload.number_or("activation_mib_per_layer", 0.0, 1e9, 0.0) * kMiB);
  workload.finish();
  return m;
}

}  // namespace ddlsim
