// Verifiers of the einsum dialect; --verify-diagnostics prints each message (and exits 0).
// RUN: solar-opt %s --split-input-file --verify-diagnostics | filecheck %s

einsum.graph "k" {
  einsum.tensor "x" : f32 array<i64: 4> "input"
  einsum.tensor "y" : f32 array<i64: 4> "output"
  einsum.node "S0" "i, i -> i" ins(["x"] : [f32]) outs("y" : f32) combine "mul" reduce "none" expr "x[i] * x[i]" domain "{ S0[i] : 0 <= i < 4 }" stmts array<i64: 0>
}
// CHECK: node S0: equation has 2 operands but the node has 1 inputs

// -----

einsum.graph "k" {
  einsum.tensor "x" : f32 array<i64: 4> "input"
  einsum.tensor "y" : f32 array<i64: 4> "output"
  einsum.node "S0" "i -> i" ins(["x"] : [f32]) outs("y" : f32) combine "copy" reduce "sum" expr "x[i]" domain "{ S0[i] : 0 <= i < 4 }" stmts array<i64: 0>
}
// CHECK: node S0: reduce must be one of none, add, mul, max, min

// -----

einsum.graph "k" {
  einsum.tensor "x" : f32 array<i64: 4> "input"
  einsum.tensor "y" : f32 array<i64: 4> "output"
  einsum.node "S0" "(j + 1) -> i" ins(["x"] : [f32]) outs("y" : f32) combine "copy" reduce "none" expr "x[j + 1]" domain "{ S0[i] : 0 <= i < 4 }" stmts array<i64: 0>
}
// CHECK: node S0: index '(j + 1)' uses 'j', which is not a variable of the domain

// -----

einsum.graph "k" {
  einsum.tensor "x" : f32 array<i64: 4> "input"
  einsum.tensor "y" : f32 array<i64: 4> "output"
  einsum.node "S0" "i -> i" ins(["w"] : [f32]) outs("y" : f32) combine "copy" reduce "none" expr "w[i]" domain "{ S0[i] : 0 <= i < 4 }" stmts array<i64: 0>
}
// CHECK: node S0: unknown tensor 'w'
