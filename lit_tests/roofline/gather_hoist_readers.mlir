// RUN: solar-opt %s --roofline=fused --hw H100_SXM --width 160 | filecheck %s
// RUN: solar-opt %s --roofline=fused --hw H100_SXM --width 160 --algorithms classical | filecheck %s --check-prefix=CLASSICAL
// RUN: solar-opt %s --roofline=fused --hw H100_SXM --width 160 --indirect min | filecheck %s --check-prefix=MIN

// A whole-table cast read by two gathers (FlashInfer's MLA decode casts its latent cache to f32,
// then gathers each request's pages): T = f32(x), x 65,536 x 512 bf16; Y1 = 2 T[idx[0:2048]],
// Y2 = 3 T[idx[2048:4096]], f32. The traces (as the torch frontend records them; here 4,096
// distinct rows) say each gather touched 2,048 rows of T, 2,097,152 elements together. Each reader
// computes its rows alone, `T_rows[a, j] = f32(x[idx[a], j])` (docs/bounds.md section 0, "gathered
// elements computed alone"), and the cast of the whole table goes. Bytes: x 4,096 rows x 1,024 B =
// 4,194,304, idx 4,096 x 8 = 32,768, Y1 and Y2 2 x 2,048 x 512 x 4 = 8,388,608: 12,615,680 B,
// 3.766 us at 3.35 TB/s. As written: all of x, 67,108,864 B: 75,530,240 B, 22.55 us. With
// --indirect min each gather reads one row at the fewest: 1,024 + 32,768 + 8,388,608 = 8,422,400 B.
// CHECK: priced as gathered rows computed alone: T_rows[a,
// CHECK-NEXT: j] = f32(x[idx[a], j]); gathered rows computed alone: T_rows_1[a, j] = f32(x[idx[a + 2048], j]); as written: fused H100_SXM 22.55 us
// CHECK: | fused {{ *}}| 12,615,680 | 3.766 us | memory
// CHECK: totals: 2,097,152 FLOPs (0 matrix, 2,097,152 vector); 218,136,576 bytes unfused, 12,615,680 bytes compulsory
// CHECK: counted as the traced sample touched them
// CHECK-SAME: S0_rows (x); S0_rows_1 (x)
// CLASSICAL: | fused {{ *}}| 75,530,240 | 22.55 us | memory
// MIN: | fused {{ *}}| 8,422,400 | 2.514 us | memory
builtin.module {
  loop.kernel "k" {
    loop.tensor "x" : bf16 array<i64: 65536, 512> "input"
    loop.tensor "idx" : i64 array<i64: 4096> "input"
    loop.tensor "Y1" : f32 array<i64: 2048, 512> "output"
    loop.tensor "Y2" : f32 array<i64: 2048, 512> "output"
    loop.tensor "T" : f32 array<i64: 65536, 512> "local"
    loop.for "i" = affine_map<() -> (0)> to affine_map<() -> (65536)> step 1 : i64 {
      loop.for "j" = affine_map<(d0) -> (0)> to affine_map<(d0) -> (512)> step 1 : i64 {
        loop.stmt "T" affine_map<(d0, d1) -> (d0, d1)> "=" {
          %0 = loop.read "x" affine_map<(d0, d1) -> (d0, d1)> dynamic array<i64> : bf16
          %1 = loop.cast %0 : bf16 -> f32
          loop.yield %1 : f32
        }
      }
    }
    loop.for "a" = affine_map<() -> (0)> to affine_map<() -> (2048)> step 1 : i64 {
      loop.for "j" = affine_map<(d0) -> (0)> to affine_map<(d0) -> (512)> step 1 : i64 {
        loop.stmt "Y1" affine_map<(d0, d1) -> (d0, d1)> "=" traced [#loop.traced<"T", read, 1048576, 1048576, 1, union "T" 2097152 member 0 of 2>] {
          %2 = loop.read "idx" affine_map<(d0, d1) -> (d0)> dynamic array<i64> : i64
          %3 = loop.read "T" affine_map<(d0, d1) -> (0, d1)> dynamic array<i64: 0>(%2 : i64) : f32
          %4 = loop.const 2.000000e+00 : f64 : f32
          %5 = loop.binary "mul" %3, %4 : f32, f32 -> f32
          loop.yield %5 : f32
        }
      }
    }
    loop.for "a" = affine_map<() -> (0)> to affine_map<() -> (2048)> step 1 : i64 {
      loop.for "j" = affine_map<(d0) -> (0)> to affine_map<(d0) -> (512)> step 1 : i64 {
        loop.stmt "Y2" affine_map<(d0, d1) -> (d0, d1)> "=" traced [#loop.traced<"T", read, 1048576, 1048576, 1, union "T" 2097152 member 1 of 2>] {
          %6 = loop.read "idx" affine_map<(d0, d1) -> ((d0 + 2048))> dynamic array<i64> : i64
          %7 = loop.read "T" affine_map<(d0, d1) -> (0, d1)> dynamic array<i64: 0>(%6 : i64) : f32
          %8 = loop.const 3.000000e+00 : f64 : f32
          %9 = loop.binary "mul" %7, %8 : f32, f32 -> f32
          loop.yield %9 : f32
        }
      }
    }
  }
}
