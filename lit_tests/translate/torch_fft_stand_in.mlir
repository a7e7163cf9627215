// An FFT convolution (examples/torch/fft_conv.py; docs/torch-frontend.md, "Complex tensors and FFTs"):
// complex values are (real, imaginary) pairs in a trailing dim of 2, and each transform is a direct DFT
// nest, its twiddle computed from `k n mod N`, whose origin marks it a stand-in for cuFFT's algorithm.
// Hand counts: the spectra are 2 x 32 x 257 bins (n = 512); k_f / n divides both parts of 32 x 257
// bins (16,448); the complex product takes 6 FLOPs per bin (98,688) less the 3 of bin 0's imaginary
// part, which irfft ignores (2 x 32 rows: 98,496); the skip connection 2 x 2 x 32 x 256 (32,768):
// 147,712 FLOPs, none of them in a transform.
// RUN: solar-opt %S/../../examples/torch/fft_conv.py --translate --frontend-options 'validate=false' --quiet > %t.mlir
// RUN: solar-opt %t.mlir | filecheck %s --check-prefix=IR
// RUN: solar-opt %S/../../examples/torch/fft_conv.py --translate --roofline=unfused --hw H100_SXM --ops --width 400 --quiet | filecheck %s

// IR:      loop.tensor "_fft_r2c" : f32 array<i64: 32, 257, 2> "local"
// IR:      loop.stmt "_fft_r2c" affine_map<(d0, d1, d2) -> (d0, d1, 0)> "+=" origin <0, "aten.fft_rfft.default", "", "", "stand-in">
// IR-NEXT:   loop.read "constant_pad_nd" affine_map<(d0, d1, d2) -> (d0, d2)>
// IR-NEXT:   loop.index affine_map<(d0, d1, d2) -> (d1)>
// IR-NEXT:   loop.index affine_map<(d0, d1, d2) -> (d2)>
// IR-NEXT:   loop.binary "mul"
// IR-NEXT:   loop.const 512 : i64
// IR-NEXT:   loop.binary "mod"
// IR:        loop.unary "cos"

// CHECK:      stand-ins:  fft_rfft ({{.*}}fft_conv.py:21): a reference nest for the op's production algorithm, not priced as written (8,947,712 FLOPs): no compute term, its traffic counted
// CHECK-NEXT:             fft_rfft ({{.*}}fft_conv.py:22): a reference nest
// CHECK-NEXT:             fft_irfft ({{.*}}fft_conv.py:23): a reference nest
// CHECK:      op         line   FLOPs    bytes  FLOP/B     bound  share  bound by
// CHECK:      fft_rfft   21         0  98.5 kB       0
// CHECK:      mul        23    98.4 k   328 kB
// CHECK:      fft_irfft  23         0   196 kB       0
// CHECK:      totals: 147,712 FLOPs (0 matrix, 147,712 vector)
