import torch

BLOCK_SIZE = 32
E8M0_EXPONENT_BIAS = 127
MBITS_F32, F32_EXP_BIAS = 23, 127
F8E4M3_MAX = 448.0
F8E4M3_MAX_POW2 = 8  # floor(log2(448))
F32_MIN_NORMAL = 2 ** (-126)


@torch.no_grad()
def run(x):
    m, k = x.shape
    data_hp = x.to(torch.float32).reshape(m, k // BLOCK_SIZE, BLOCK_SIZE)
    max_abs = torch.amax(torch.abs(data_hp), dim=-1)
    max_abs_int32 = max_abs.view(torch.int32)
    extracted_pow2 = ((max_abs_int32 >> MBITS_F32) & 0b11111111) - F32_EXP_BIAS
    scale_e8m0_unbiased = extracted_pow2 - F8E4M3_MAX_POW2
    scale_e8m0_unbiased = torch.clamp(scale_e8m0_unbiased, min=-E8M0_EXPONENT_BIAS,
                                      max=E8M0_EXPONENT_BIAS + 1)
    scale_e8m0_biased = (scale_e8m0_unbiased + E8M0_EXPONENT_BIAS).to(torch.uint8)
    scale_fp32 = (scale_e8m0_biased.to(torch.int32) << MBITS_F32).view(torch.float32)
    scale_fp32 = torch.clamp(scale_fp32, min=F32_MIN_NORMAL)
    data_lp = data_hp / scale_fp32.unsqueeze(-1)
    data_lp = torch.clamp(data_lp, min=-F8E4M3_MAX, max=F8E4M3_MAX).to(torch.float8_e4m3fn)
    return data_lp.reshape(m, k), scale_e8m0_biased.to(torch.int32)
