// Verifiers of indirect writes (loop.stmt with dynamic target positions): each case is one
// verification error, printed by --verify-diagnostics (which exits 0), so FileCheck sees every
// message in order.
// RUN: solar-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One dynamic position, but the yield passes no index value.
loop.kernel "k" {
  loop.tensor "A" : f32 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 8> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (0)> "+=" dynamic array<i64: 0> {
      %0 = loop.read "A" affine_map<(d0) -> (d0)> dynamic array<i64> : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: write of 'C': 1 dynamic positions but loop.yield passes 0 index values

// -----

// A dynamic position outside the target's rank.
loop.kernel "k" {
  loop.tensor "I" : i64 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 8> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (0)> "=" dynamic array<i64: 1> {
      %0 = loop.const 1.0 : f64 : f32
      %1 = loop.read "I" affine_map<(d0) -> (d0)> dynamic array<i64> : i64
      loop.yield %0 : f32 index(%1 : i64)
    }
  }
}
// CHECK: write of 'C': dynamic positions must be distinct dimensions in increasing order, got [1]

// -----

// A float index value.
loop.kernel "k" {
  loop.tensor "A" : f32 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 8> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (0)> "=" dynamic array<i64: 0> {
      %0 = loop.read "A" affine_map<(d0) -> (d0)> dynamic array<i64> : f32
      loop.yield %0 : f32 index(%0 : f32)
    }
  }
}
// CHECK: indirect index into 'C' must be an integer

// -----

// The dynamic position must hold the placeholder index 0.
loop.kernel "k" {
  loop.tensor "I" : i64 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 8> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" dynamic array<i64: 0> {
      %0 = loop.const 1.0 : f64 : f32
      %1 = loop.read "I" affine_map<(d0) -> (d0)> dynamic array<i64> : i64
      loop.yield %0 : f32 index(%1 : i64)
    }
  }
}
// CHECK: write of 'C': dynamic position 0 must hold the placeholder index 0

// -----

// An empty dynamic list is spelled by leaving it out.
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 8> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (8)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" dynamic array<i64> {
      %0 = loop.const 1.0 : f64 : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: write of 'C': an empty dynamic list is written by omitting it

// -----

// An einsum node whose output map has a symbol (a loaded index) must say which position it is.
einsum.graph @g {
  einsum.tensor @ids : i64 array<i64: 4> "input" -> tensor<4xi64>
  einsum.tensor @G : f32 array<i64: 8> "output" -> tensor<8xf32>
  einsum.node @S0 ins([@ids]) outs(@G) -> tensor<8xf32> reduce "add" attributes {ivs = ["t"], iterator_types = ["parallel"], lower_bounds = affine_map<(d0) -> (0)>, upper_bounds = affine_map<(d0) -> (4)>, steps = array<i64: 1>, indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0)[s0] -> (s0)>], scopes = array<i64: 0>} {
  ^bb0(%i: i64):
    %v = loop.cast %i : i64 -> f32
    einsum.yield %v, %i : f32, i64
  }
}
// CHECK: node S0: the output map must be over the 1 loop variables with one symbol per dynamic position
