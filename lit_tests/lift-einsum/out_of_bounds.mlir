// The einsum.node verifier: every direct access stays inside its tensor on the node's domain (what
// check_bounds asks of a loop-IR statement). Intervals of the loop box decide most indices; the rest
// are decided exactly on the domain with its steps and guards, so a valid graph is never rejected:
// the first four graphs (a triangular domain, a guarded one, a strided one, a gather) are valid
// although their loop boxes reach past the tensors; each later graph reads or writes one past the end.
// RUN: solar-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: einsum.graph @tri
// CHECK: einsum.graph @guarded
// CHECK: einsum.graph @strided
// CHECK: einsum.graph @gather
einsum.graph @tri {
  %A = einsum.tensor @A : f32 array<i64: 8, 8> "input" -> tensor<8x8xf32>
  %C = einsum.tensor @C : f32 array<i64: 8> "output" -> tensor<8xf32>
  %C_1 = einsum.node @S1 ins([@A], %A : tensor<8x8xf32>) outs(@C, %C : tensor<8xf32>) -> tensor<8xf32> reduce "add" init 0.000000e+00 : f64 attributes {ivs = ["i", "j"], iterator_types = ["parallel", "reduction"], lower_bounds = affine_map<(d0, d1) -> (0, 0)>, upper_bounds = affine_map<(d0, d1) -> (8, ((d0 * -1) + 8))>, steps = array<i64: 1, 1>, indexing_maps = [affine_map<(d0, d1) -> (d0, (d0 + d1))>, affine_map<(d0, d1) -> (d0)>], scopes = array<i64: 0, 1>, init_depth = array<i64: 1, 0>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  }
  einsum.return %C_1 : tensor<8xf32>
}
einsum.graph @guarded {
  %A = einsum.tensor @A : f32 array<i64: 4, 8> "input" -> tensor<4x8xf32>
  %C = einsum.tensor @C : f32 array<i64: 4, 10> "output" -> tensor<4x10xf32>
  %C_1 = einsum.node @S0 ins([@A], %A : tensor<4x8xf32>) outs(@C, %C : tensor<4x10xf32>) -> tensor<4x10xf32> reduce "none" attributes {ivs = ["i", "j"], iterator_types = ["parallel", "parallel"], lower_bounds = affine_map<(d0, d1) -> (0, 0)>, upper_bounds = affine_map<(d0, d1) -> (4, 10)>, steps = array<i64: 1, 1>, indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], scopes = array<i64: 1, 2>, guards = affine_set<(d0, d1) : (((d1 * -1) + 7) >= 0)>, guard_scopes = array<i64: 0>, guard_depths = array<i64: 2>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  }
  einsum.return %C_1 : tensor<4x10xf32>
}
einsum.graph @strided {
  %B = einsum.tensor @B : f32 array<i64: 9> "input" -> tensor<9xf32>
  %C = einsum.tensor @C : f32 array<i64: 9> "output" -> tensor<9xf32>
  %C_1 = einsum.node @S0 ins([@B], %B : tensor<9xf32>) outs(@C, %C : tensor<9xf32>) -> tensor<9xf32> reduce "none" attributes {ivs = ["j"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (1)>, upper_bounds = affine_map<(d0) -> (9)>, steps = array<i64: 2>, indexing_maps = [affine_map<(d0) -> ((d0 + 1))>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  }
  einsum.return %C_1 : tensor<9xf32>
}
einsum.graph @gather {
  %ids = einsum.tensor @ids : i64 array<i64: 4> "input" -> tensor<4xi64>
  %E = einsum.tensor @E : f32 array<i64: 10, 8> "weight" -> tensor<10x8xf32>
  %Y = einsum.tensor @Y : f32 array<i64: 4, 8> "output" -> tensor<4x8xf32>
  %Y_1 = einsum.node @S0 ins([@ids], %ids : tensor<4xi64>) outs(@Y, %Y : tensor<4x8xf32>) -> tensor<4x8xf32> reduce "none" attributes {ivs = ["t", "d"], iterator_types = ["parallel", "parallel"], lower_bounds = affine_map<(d0, d1) -> (0, 0)>, upper_bounds = affine_map<(d0, d1) -> (4, 8)>, steps = array<i64: 1, 1>, indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], scopes = array<i64: 0, 1>} {
  ^bb0(%0: i64):
    %1 = einsum.gather @E(%E : tensor<10x8xf32>) affine_map<(d0, d1)[s0] -> (s0, d1)>(%0) : (i64) -> f32
    einsum.yield %1 : f32
  }
  einsum.return %Y_1 : tensor<4x8xf32>
}

// -----

// The triangle one row too long: i + j reaches 8 at i = 0, j = 8.
einsum.graph @tri {
  %A = einsum.tensor @A : f32 array<i64: 8, 8> "input" -> tensor<8x8xf32>
  %C = einsum.tensor @C : f32 array<i64: 8> "output" -> tensor<8xf32>
  %C_1 = einsum.node @S1 ins([@A], %A : tensor<8x8xf32>) outs(@C, %C : tensor<8xf32>) -> tensor<8xf32> reduce "add" init 0.000000e+00 : f64 attributes {ivs = ["i", "j"], iterator_types = ["parallel", "reduction"], lower_bounds = affine_map<(d0, d1) -> (0, 0)>, upper_bounds = affine_map<(d0, d1) -> (8, ((d0 * -1) + 9))>, steps = array<i64: 1, 1>, indexing_maps = [affine_map<(d0, d1) -> (d0, (d0 + d1))>, affine_map<(d0, d1) -> (d0)>], scopes = array<i64: 0, 1>, init_depth = array<i64: 1, 0>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  }
  einsum.return %C_1 : tensor<8xf32>
}
// CHECK: node S1: index 1 of 'A' (i + j) leaves the range [0, 8) on the node's domain

// -----

// The guard lets j reach 8.
einsum.graph @guarded {
  %A = einsum.tensor @A : f32 array<i64: 4, 8> "input" -> tensor<4x8xf32>
  %C = einsum.tensor @C : f32 array<i64: 4, 10> "output" -> tensor<4x10xf32>
  %C_1 = einsum.node @S0 ins([@A], %A : tensor<4x8xf32>) outs(@C, %C : tensor<4x10xf32>) -> tensor<4x10xf32> reduce "none" attributes {ivs = ["i", "j"], iterator_types = ["parallel", "parallel"], lower_bounds = affine_map<(d0, d1) -> (0, 0)>, upper_bounds = affine_map<(d0, d1) -> (4, 10)>, steps = array<i64: 1, 1>, indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], scopes = array<i64: 1, 2>, guards = affine_set<(d0, d1) : (((d1 * -1) + 8) >= 0)>, guard_scopes = array<i64: 0>, guard_depths = array<i64: 2>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  }
  einsum.return %C_1 : tensor<4x10xf32>
}
// CHECK: node S0: index 1 of 'A' (j) leaves the range [0, 8) on the node's domain

// -----

// The write: C has 7 columns, the guard keeps j <= 7.
einsum.graph @guarded {
  %A = einsum.tensor @A : f32 array<i64: 4, 8> "input" -> tensor<4x8xf32>
  %C = einsum.tensor @C : f32 array<i64: 4, 7> "output" -> tensor<4x7xf32>
  %C_1 = einsum.node @S0 ins([@A], %A : tensor<4x8xf32>) outs(@C, %C : tensor<4x7xf32>) -> tensor<4x7xf32> reduce "none" attributes {ivs = ["i", "j"], iterator_types = ["parallel", "parallel"], lower_bounds = affine_map<(d0, d1) -> (0, 0)>, upper_bounds = affine_map<(d0, d1) -> (4, 10)>, steps = array<i64: 1, 1>, indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], scopes = array<i64: 1, 2>, guards = affine_set<(d0, d1) : (((d1 * -1) + 7) >= 0)>, guard_scopes = array<i64: 0>, guard_depths = array<i64: 2>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  }
  einsum.return %C_1 : tensor<4x7xf32>
}
// CHECK: node S0: index 1 of 'C' (j) leaves the range [0, 7) on the node's domain

// -----

// Stride 2 from 0: j + 1 reaches 9 at j = 8.
einsum.graph @strided {
  %B = einsum.tensor @B : f32 array<i64: 9> "input" -> tensor<9xf32>
  %C = einsum.tensor @C : f32 array<i64: 9> "output" -> tensor<9xf32>
  %C_1 = einsum.node @S0 ins([@B], %B : tensor<9xf32>) outs(@C, %C : tensor<9xf32>) -> tensor<9xf32> reduce "none" attributes {ivs = ["j"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (9)>, steps = array<i64: 2>, indexing_maps = [affine_map<(d0) -> ((d0 + 1))>, affine_map<(d0) -> (d0)>], scopes = array<i64: 0>} {
  ^bb0(%0: f32):
    einsum.yield %0 : f32
  }
  einsum.return %C_1 : tensor<9xf32>
}
// CHECK: node S0: index 0 of 'B' (j + 1) leaves the range [0, 9) on the node's domain

// -----

// A gather's affine position is checked; its loaded one (s0) is data.
einsum.graph @gather {
  %ids = einsum.tensor @ids : i64 array<i64: 4> "input" -> tensor<4xi64>
  %E = einsum.tensor @E : f32 array<i64: 10, 8> "weight" -> tensor<10x8xf32>
  %Y = einsum.tensor @Y : f32 array<i64: 4, 8> "output" -> tensor<4x8xf32>
  %Y_1 = einsum.node @S0 ins([@ids], %ids : tensor<4xi64>) outs(@Y, %Y : tensor<4x8xf32>) -> tensor<4x8xf32> reduce "none" attributes {ivs = ["t", "d"], iterator_types = ["parallel", "parallel"], lower_bounds = affine_map<(d0, d1) -> (0, 0)>, upper_bounds = affine_map<(d0, d1) -> (4, 8)>, steps = array<i64: 1, 1>, indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], scopes = array<i64: 0, 1>} {
  ^bb0(%0: i64):
    %1 = einsum.gather @E(%E : tensor<10x8xf32>) affine_map<(d0, d1)[s0] -> (s0, (d1 + 1))>(%0) : (i64) -> f32
    einsum.yield %1 : f32
  }
  einsum.return %Y_1 : tensor<4x8xf32>
}
// CHECK: node S0: index 1 of 'E' (d + 1) leaves the range [0, 8) on the node's domain
