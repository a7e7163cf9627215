// Verifiers of the einsum dialect; --verify-diagnostics prints each message (and exits 0).
// RUN: solar-opt %s --split-input-file --verify-diagnostics | filecheck %s

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input"
  einsum.tensor @y : f32 array<i64: 4> "output"
  einsum.node @S0 ins([@x]) outs(@y) reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: node S0: 1 inputs need 2 indexing maps (the output's last), got 3

// -----

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input"
  einsum.tensor @y : f32 array<i64: 4> "output"
  einsum.node @S0 ins([@x]) outs(@y) reduce "sum" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: node S0: reduce must be one of none, add, mul, max, min

// -----

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input"
  einsum.tensor @y : f32 array<i64: 4> "output"
  einsum.node @S0 ins([@x]) outs(@y) reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: node S0: the map of input 'x' must be over the 1 loop variables, without symbols

// -----

einsum.graph @k {
  einsum.tensor @x : f32 array<i64: 4> "input"
  einsum.tensor @y : f32 array<i64: 4> "output"
  einsum.node @S0 ins([@w]) outs(@y) reduce "none" attributes {ivs = ["i"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%a: f32):
    einsum.yield %a : f32
  }
}
// CHECK: unknown tensor 'w'
