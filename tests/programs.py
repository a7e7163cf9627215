"""Small loop-IR programs shared by several test modules (hand-derived numbers live in the tests)."""

# tril(A @ B) with an 8x5 by 5x8 product: narrowing keeps the 36 lower-triangle outputs.
TRIL = """kernel tril(A: f32[8, 5] input, B: f32[5, 8] input, Y: f32[8, 8] output):
    local C: f32[8, 8]
    for i in range(8):
        for j in range(8):
            C[i, j] = 0.0
            for k in range(5):
                C[i, j] += A[i, k] * B[k, j]
    for i in range(8):
        for j in range(8):
            Y[i, j] = C[i, j] if i >= j else 0.0
"""
