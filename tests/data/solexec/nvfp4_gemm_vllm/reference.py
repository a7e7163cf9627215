import torch

BLOCK_SIZE = 16
kE2M1ToFloat = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float32)


def break_fp4_bytes(a, dtype):
    assert a.dtype == torch.uint8
    m, n = a.shape
    a_flat = a.flatten()
    high = (a_flat & 0xF0) >> 4
    low = a_flat & 0x0F
    combined = torch.stack((low, high), dim=1).flatten()
    signs = (combined & 0x08).to(torch.bool)
    abs_vals = (combined & 0x07).to(torch.long)
    kE2M1 = kE2M1ToFloat.to(device=a.device)
    values = kE2M1[abs_vals] * torch.where(signs, -1.0, 1.0)
    return values.reshape(m, n * 2).to(dtype=dtype)


def dequantize_to_dtype(tensor_fp4, tensor_sf, global_scale, dtype, block_size=BLOCK_SIZE):
    m, packed_k = tensor_fp4.shape
    k = packed_k * 2
    tensor_f32 = break_fp4_bytes(tensor_fp4.view(torch.uint8), torch.float32)
    tensor_f32 = tensor_f32.reshape(m, k // block_size, block_size)
    tensor_sf = tensor_sf.view(torch.float8_e4m3fn)
    tensor_sf_dtype = tensor_sf.to(torch.float32) / global_scale
    out = (tensor_f32 * tensor_sf_dtype.unsqueeze(-1)).reshape(m, k)
    return out.to(dtype=dtype)


@torch.no_grad()
def run(a_fp4, b_fp4, a_scale, b_scale, a_global_scale, b_global_scale):
    a_in_dtype = dequantize_to_dtype(a_fp4, a_scale, a_global_scale, torch.bfloat16)
    b_in_dtype = dequantize_to_dtype(b_fp4, b_scale, b_global_scale, torch.bfloat16)
    return torch.matmul(a_in_dtype, b_in_dtype.t())
