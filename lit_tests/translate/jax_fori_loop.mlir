// The JAX frontend on examples/jax/fori_loop.py: the 16-step fori_loop is one sequential loop
// (`scan`) with each body primitive inside it once (never 16 copies); the loop counter is the loop
// variable, so `forcing[i]` is the affine read forcing[s, ...]; the carry lives in per-step rows,
// the new value written straight into row s + 1; the result is row 16. Every statement keeps the
// line of the model file it comes from.
// RUN: solar-opt %S/../../examples/jax/fori_loop.py --translate --frontend-options 'validate=false no-cache=true' -t loop | filecheck %s

// CHECK:      kernel fori_loop(x: f32[32, 64] input, w: f32[64, 64] input, forcing: f32[16, 64] input, scan_1: f32[32, 64] output):
// CHECK-NEXT:     local arg_3_carry: f32[17, 32, 64]
// CHECK:              arg_3_carry[0, i0, i1] = x[i0, i1] @ "{{.*}}fori_loop.py:15"
// CHECK-NEXT:     for s in scan(16):
// CHECK:                      dot_general[i0, j0] += arg_3_carry[s, i0, k0] * w[k0, j0] @ "{{.*}}fori_loop.py:13"
// CHECK:                  tanh[i0, i1] = tanh(dot_general[i0, i1])
// CHECK:                  add_3[i0, i1] = tanh[i0, i1] + forcing[s, i1]
// CHECK:                  mul[i0, i1] = 0.10000000149011612 * add_3[i0, i1]
// CHECK:                  arg_3_carry[s + 1, i0, i1] = arg_3_carry[s, i0, i1] + mul[i0, i1]
// CHECK-NOT:  for s in
// CHECK:              scan_1[i0, i1] = arg_3_carry[16, i0, i1] @ "{{.*}}fori_loop.py:15"
