#include "workloads/cnn.hpp"

#include <stdexcept>
#include <string>

namespace ddlsim {

OperatorGraph build_vgg(int depth, std::int64_t batch, DataType dtype) {
  // Convolutions per stage: VGG-16 2, 2, 3, 3, 3; VGG-19 2, 2, 4, 4, 4.
  std::vector<int> convs;
  if (depth == 16) convs = {2, 2, 3, 3, 3};
  else if (depth == 19) convs = {2, 2, 4, 4, 4};
  else throw std::invalid_argument("VGG depth must be 16 or 19, got " + std::to_string(depth));
  const std::int64_t widths[] = {64, 128, 256, 512, 512};
  OperatorGraph G("vgg" + std::to_string(depth));
  std::uint32_t x = G.input("images", {batch, 3, 224, 224}, dtype);
  for (int stage = 0; stage < 5; ++stage) {
    G.set_layer(stage);
    const std::string S = "stage" + std::to_string(stage + 1) + ".";
    for (int i = 0; i < convs[stage]; ++i) {
      const std::string C = S + "conv" + std::to_string(i + 1);
      x = G.relu(C + ".relu", G.conv2d(C, x, widths[stage], 3, 1, 1, true));
    }
    x = G.pool(S + "pool", x, 2, 2, 0);
  }
  G.set_layer(5);
  x = G.view("flatten", x, {batch, 512 * 7 * 7});
  x = G.dropout("fc1.dropout", G.relu("fc1.relu", G.linear("fc1", x, 4096, true)));
  x = G.dropout("fc2.dropout", G.relu("fc2.relu", G.linear("fc2", x, 4096, true)));
  x = G.linear("fc3", x, 1000, true);
  G.set_layer(-1);
  G.cross_entropy("loss", x);
  return G;
}

OperatorGraph build_resnet50(std::int64_t batch, DataType dtype) {
  OperatorGraph G("resnet50");
  std::uint32_t x = G.input("images", {batch, 3, 224, 224}, dtype);
  G.set_layer(0);
  x = G.relu("stem.relu", G.batch_norm("stem.bn", G.conv2d("stem.conv", x, 64, 7, 2, 3, false)));
  x = G.pool("stem.pool", x, 3, 2, 1);
  const int blocks[] = {3, 4, 6, 3};
  const std::int64_t widths[] = {64, 128, 256, 512};
  int layer = 1;
  for (int stage = 0; stage < 4; ++stage) {
    for (int i = 0; i < blocks[stage]; ++i) {
      G.set_layer(layer++);
      const std::string B = "stage" + std::to_string(stage + 1) + ".block" + std::to_string(i + 1) + ".";
      const std::int64_t w = widths[stage];
      const std::int64_t stride = (i == 0 && stage > 0) ? 2 : 1;
      std::uint32_t y = G.relu(B + "relu1", G.batch_norm(B + "bn1", G.conv2d(B + "conv1", x, w, 1, 1, 0, false)));
      y = G.relu(B + "relu2", G.batch_norm(B + "bn2", G.conv2d(B + "conv2", y, w, 3, stride, 1, false)));
      y = G.batch_norm(B + "bn3", G.conv2d(B + "conv3", y, 4 * w, 1, 1, 0, false));
      std::uint32_t shortcut = x;
      if (i == 0) shortcut = G.batch_norm(B + "down.bn", G.conv2d(B + "down", x, 4 * w, 1, stride, 0, false));
      x = G.relu(B + "relu3", G.add(B + "residual", y, shortcut));
    }
  }
  G.set_layer(layer);
  x = G.pool("avgpool", x, 7, 1, 0);
  x = G.linear("fc", G.view("flatten", x, {batch, 2048}), 1000, true);
  G.set_layer(-1);
  G.cross_entropy("loss", x);
  return G;
}

OperatorGraph build_mlp(const std::vector<std::int64_t>& widths, std::int64_t batch, DataType dtype) {
  if (widths.size() < 2) throw std::invalid_argument("an MLP needs an input width and at least one layer");
  OperatorGraph G("mlp");
  std::uint32_t x = G.input("inputs", {batch, widths[0]}, dtype);
  for (std::size_t i = 1; i < widths.size(); ++i) {
    G.set_layer(static_cast<int>(i - 1));
    const std::string L = "fc" + std::to_string(i);
    x = G.linear(L, x, widths[i], true);
    if (i + 1 < widths.size()) x = G.relu(L + ".relu", x);
  }
  G.set_layer(-1);
  G.cross_entropy("loss", x);
  return G;
}

}  // namespace ddlsim
