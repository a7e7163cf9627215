// Verifiers of the einsum dialect; --verify-diagnostics prints each message (and exits 0).
// RUN: solar-opt %s --split-input-file --verify-diagnostics | filecheck %s

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input" -> tensor<4xf32>
  einsum.tensor @y : f32 array<i64: 4> "output" -> tensor<4xf32>
  einsum.node @S0 ins([@x]) outs(@y) -> tensor<4xf32> reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: node S0: 1 inputs need 2 indexing maps (the output's last), got 3

// -----

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input" -> tensor<4xf32>
  einsum.tensor @y : f32 array<i64: 4> "output" -> tensor<4xf32>
  einsum.node @S0 ins([@x]) outs(@y) -> tensor<4xf32> reduce "sum" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: node S0: reduce must be one of none, add, mul, max, min

// -----

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input" -> tensor<4xf32>
  einsum.tensor @y : f32 array<i64: 4> "output" -> tensor<4xf32>
  einsum.node @S0 ins([@x]) outs(@y) -> tensor<4xf32> reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: node S0: the map of input 'x' must be over the 1 loop variables, without symbols

// -----

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input" -> tensor<4xf32>
  einsum.tensor @y : f32 array<i64: 4> "output" -> tensor<4xf32>
  einsum.node @S0 ins([@w]) outs(@y) -> tensor<4xf32> reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: unknown tensor 'w'

// -----

// SSA edges: the second write of y must take the first's result as its init, not y's initial value.
einsum.graph @k {
  %x = einsum.tensor @x : f32 array<i64: 4> "input" -> tensor<4xf32>
  %y = einsum.tensor @y : f32 array<i64: 4> "output" -> tensor<4xf32>
  %y1 = einsum.node @S0 ins([@x], %x : tensor<4xf32>) outs(@y, %y : tensor<4xf32>) -> tensor<4xf32> reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (2)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
  %y2 = einsum.node @S1 ins([@x], %x : tensor<4xf32>) outs(@y, %y : tensor<4xf32>) -> tensor<4xf32> reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (2)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 1>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
  einsum.return %y2 : tensor<4xf32>
}
// CHECK: node S1: the init (destination) is a stale value of 'y', not its latest value (the result of the last earlier node writing it, or the tensor's initial value)

// -----

// The graph returns the final value of each output tensor.
einsum.graph @k {
  %x = einsum.tensor @x : f32 array<i64: 4> "input" -> tensor<4xf32>
  %y = einsum.tensor @y : f32 array<i64: 4> "output" -> tensor<4xf32>
  %y1 = einsum.node @S0 ins([@x], %x : tensor<4xf32>) outs(@y, %y : tensor<4xf32>) -> tensor<4xf32> reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
  einsum.return %y : tensor<4xf32>
}
// CHECK: einsum.return must give the final value of every output tensor, in declaration order
