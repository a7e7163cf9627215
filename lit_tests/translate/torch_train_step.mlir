// A training step of examples/train/mlp.py (docs/training.md): every statement's origin names its
// phase and the module whose forward produced it (fc2's weight and input gradients are fc2's); the
// origin survives a round trip through the printed IR; the report sums the step by phase.
// Hand counts (tests/test_train_step.py): forward matrix 2*8*32*64 + 2*8*64*16 = 49,152; backward
// matrix 2 x 16,384 (fc2) + 32,768 (fc1, its input needs no gradient) = 65,536; AdamW 14 FLOPs over
// 13 kernels per element of the 3,152 parameters: 44,128 FLOPs in 52 kernels.
// RUN: solar-opt %S/../../examples/train/mlp.py --translate --step train --frontend-options 'validate=false' --quiet > %t.mlir
// RUN: solar-opt %t.mlir | filecheck %s --check-prefix=IR
// RUN: solar-opt %S/../../examples/train/mlp.py --translate --roofline=all --hw H100_SXM --step train --optimizer adamw --algorithms classical --width 120 --quiet | filecheck %s

// IR: loop.stmt "addmm" {{.*}} origin <0, "aten.addmm.default", "fc1", "forward">
// IR: origin <{{[0-9]+}}, "aten.mm.default", "fc2", "backward">
// IR: origin <{{[0-9]+}}, "aten.mm.default", "fc1", "backward">

// CHECK:      validation: validated (torch-make_fx frontend, full)
// CHECK:      step:       one training step: forward, loss, parameter gradients (backward), then the adamw update
// CHECK:      training step by phase (the bounds above cover the whole step):
// Each eager kernel that reads takes at least H100's latency floor, 141 ns (docs/bounds.md section 9):
// the six forward kernels 846 ns (their bytes alone 7.586 ns), the 52 optimizer kernels 7.332 us.
// CHECK-NEXT:   forward: 50,049 FLOPs (49,152 matrix), 25,412 B unfused, 6 kernels, 846 ns on H100_SXM
// CHECK-NEXT:   backward: {{[0-9,]+}} FLOPs (65,536 matrix), {{.*}} on H100_SXM
// CHECK-NEXT:   optimizer: 44,128 FLOPs (0 matrix), 403,456 B unfused, 52 kernels, 7.332 us on H100_SXM
