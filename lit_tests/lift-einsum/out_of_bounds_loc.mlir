// Without --verify-diagnostics, an out-of-bounds node is one line at the node's source position
// (its op location), naming the node and the tensor, and solar-opt exits 1.
// RUN: not solar-opt %s 2>&1 | filecheck %s
// CHECK:      {{^}}solar-opt: error: model.py:3: node S0: index 0 of 'X' (i + 1) leaves the range [0, 4) on the node's domain
// CHECK-NOT:  {{.}}

einsum.graph @k {
  %X = einsum.tensor @X : f32 array<i64: 4> "input" -> tensor<4xf32>
  %Y = einsum.tensor @Y : f32 array<i64: 4> "output" -> tensor<4xf32>
  %Y_1 = einsum.node @S0 ins([@X], %X : tensor<4xf32>) outs(@Y, %Y : tensor<4xf32>) -> tensor<4xf32> reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> ((d0 + 1))>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  } loc("model.py":3:0)
  einsum.return %Y_1 : tensor<4xf32>
}
