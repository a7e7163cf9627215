import torch


@torch.no_grad()
def run(probs, input_layernorm_weight, post_layernorm_bias, attention_mask, pad_mask, cos, x_rstd, A_log,
        A_cumsum, routing_weights, q_proj, idx, x, eps):
    h = torch.log(probs) * input_layernorm_weight.float() + post_layernorm_bias.float()
    h = (h * cos + A_cumsum * torch.exp(A_log)) @ q_proj + routing_weights * x.float()
    keep = (attention_mask == 0).float().sum(-1) * pad_mask
    z = keep * torch.sqrt(x_rstd) + idx.float() * abs(eps)
    return h, z
