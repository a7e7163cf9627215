// Verifiers of the loop dialect: each case is one verification error, printed by
// --verify-diagnostics (which exits 0), so FileCheck sees every message in order.
// RUN: solar-opt %s --split-input-file --verify-diagnostics | filecheck %s

// A statement yields i64 into an f32 tensor.
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {
      %0 = loop.const 1 : i64 : i64
      loop.yield %0 : i64
    }
  }
}
// CHECK: type mismatch: 'C' is f32 but the value is i64

// -----

// A scalar operation outside the closed set.
loop.kernel "k" {
  loop.tensor "A" : f32 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {
      %0 = loop.read "A" affine_map<(d0) -> (d0)> dynamic array<i64> : f32
      %1 = loop.unary "frobnicate" %0 : f32 -> f32
      loop.yield %1 : f32
    }
  }
}
// CHECK: unknown scalar operation 'frobnicate' (known: neg, exp, log, sqrt, rsqrt, tanh, sigmoid, erf, abs, floor, ceil, round, sign, not, sin, cos, log1p, expm1, reciprocal, isnan, atan, asin, acos, sinh, cosh, asinh, acosh, atanh)

// -----

// An inner loop reuses the name of an enclosing loop variable.
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.for "i" = affine_map<(d0) -> (0)> to affine_map<(d0) -> (4)> step 1 : i64 {
      loop.stmt "C" affine_map<(d0, d1) -> (d1)> "=" {
        %0 = loop.const 0.0 : f64 : f32
        loop.yield %0 : f32
      }
    }
  }
}
// CHECK: loop variable 'i' shadows an enclosing loop variable

// -----

// A rank-2 tensor read with one index.
loop.kernel "k" {
  loop.tensor "A" : f32 array<i64: 4, 4> "input"
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {
      %0 = loop.read "A" affine_map<(d0) -> (d0)> dynamic array<i64> : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: 'A' has rank 2 but is indexed with 1 indices

// -----

// A rank-1 tensor written with two indices.
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0, 0)> "=" {
      %0 = loop.const 0.0 : f64 : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: 'C' has rank 1 but is indexed with 2 indices

// -----

// Inputs are read-only.
loop.kernel "k" {
  loop.tensor "A" : f32 array<i64: 4> "input"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "A" affine_map<(d0) -> (d0)> "=" {
      %0 = loop.const 0.0 : f64 : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: cannot write to input tensor 'A'

// -----

// An index map over more loop variables than enclose the statement.
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0, d1) -> (d1)> "=" {
      %0 = loop.const 0.0 : f64 : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: index of 'C' has 2 dimensions and 0 symbols, but 1 loops enclose it (and the loop IR has no symbols)

// -----

// The loop IR has no symbols: a loaded index is a dynamic operand.
loop.kernel "k" {
  loop.tensor "A" : f32 array<i64: 4> "input"
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {
      %0 = loop.read "A" affine_map<(d0)[s0] -> (s0)> dynamic array<i64> : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: index of 'A' has 1 dimensions and 1 symbols, but 1 loops enclose it (and the loop IR has no symbols)

// -----

// A loop bound is one affine expression (the loop IR has no min/max bounds).
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4, 8)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {
      %0 = loop.const 0.0 : f64 : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: bound of loop 'i' must have 1 result(s), got 2

// -----

// A guard is a set over the enclosing loop variables.
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.if affine_set<() : (1 >= 0)> {
      loop.stmt "C" affine_map<(d0) -> (d0)> "=" {
        %0 = loop.const 0.0 : f64 : f32
        loop.yield %0 : f32
      }
    }
  }
}
// CHECK: guard has 0 dimensions and 0 symbols, but 1 loops enclose it (and the loop IR has no symbols)

// -----

// A float constant must be stored as f64 (exact round trip of the literal).
loop.kernel "k" {
  loop.tensor "C" : f32 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "C" affine_map<(d0) -> (d0)> "=" {
      %0 = loop.const 0.5 : f32 : f32
      loop.yield %0 : f32
    }
  }
}
// CHECK: loop.const of type f32 stores its value as f64

// -----

// A reduction into a bool tensor.
loop.kernel "k" {
  loop.tensor "B" : i1 array<i64: 4> "output"
  loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (4)> step 1 : i64 {
    loop.stmt "B" affine_map<(d0) -> (d0)> "+=" {
      %0 = loop.const 1 : i64 : i1
      loop.yield %0 : i1
    }
  }
}
// CHECK: '+=' reduction into bool tensor 'B'
