// Convolutional networks and multi-layer perceptrons as operator graphs (fp32 or any
// dtype), for one training step of `batch` samples.
//
//   VGG-16/19 (Simonyan and Zisserman, 2015): 3x3 convolutions with bias and ReLU in five
//     stages of 64-512 channels, each closed by 2x2 max pooling; then 4096-4096-1000 fully
//     connected layers with ReLU and dropout. 224x224 RGB input.
//   ResNet-50 (He et al., 2016, torchvision's v1.5: the stride on the 3x3 convolution):
//     7x7/2 convolution, batch norm, ReLU, 3x3/2 max pooling, bottleneck stages of
//     3, 4, 6, 3 blocks (widths 64-512, outputs 4x), global average pooling and a
//     2048 x 1000 classifier. Convolutions have no bias.
//   MLP: linear layers of the given widths with ReLU between them.
// Each stage or block is one layer (Operator::layer) for pipeline partitioning.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/operator_graph.hpp"

namespace ddlsim {

/// depth 16 or 19.
OperatorGraph build_vgg(int depth, std::int64_t batch, DataType dtype = DataType::kFp32);
OperatorGraph build_resnet50(std::int64_t batch, DataType dtype = DataType::kFp32);
/// widths[0] is the input size, widths.back() the number of classes.
OperatorGraph build_mlp(const std::vector<std::int64_t>& widths, std::int64_t batch, DataType dtype = DataType::kFp32);

}  // namespace ddlsim
