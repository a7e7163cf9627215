import torch


def generate_inputs(axes_and_scalars, device):
    """Every request gets at least one page; the last page of each is partly filled. Values are read
    into Python (`int(...)`), as ragged layouts are built: fake tensors cannot run this."""
    batch_size = axes_and_scalars["batch_size"]
    num_pages = axes_and_scalars["num_pages"]
    num_kv_indices = axes_and_scalars["num_kv_indices"]
    page_size = axes_and_scalars["page_size"]
    cuts = torch.sort(torch.randperm(num_kv_indices - 1)[: batch_size - 1] + 1).values
    kv_indptr = torch.cat([torch.tensor([0]), cuts, torch.tensor([num_kv_indices])]).to(torch.int32)
    assert int(kv_indptr[-1]) == num_kv_indices
    kv_indices = torch.randperm(num_pages)[:num_kv_indices].to(torch.int32)
    kv_last_page_len = torch.randint(1, page_size + 1, (batch_size,), dtype=torch.int32)
    heads, kv_heads, dim = (axes_and_scalars[n] for n in ("num_qo_heads", "num_kv_heads", "head_dim"))
    cache = (num_pages, page_size, kv_heads, dim)
    return {"q": torch.randn(batch_size, heads, dim, dtype=torch.bfloat16, device=device),
            "k_cache": torch.randn(cache, dtype=torch.bfloat16, device=device),
            "v_cache": torch.randn(cache, dtype=torch.bfloat16, device=device),
            "kv_indptr": kv_indptr.to(device), "kv_indices": kv_indices.to(device),
            "kv_last_page_len": kv_last_page_len.to(device), "sm_scale": dim ** -0.5}


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    batch_size, num_qo_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = k_cache.shape
    group = num_qo_heads // num_kv_heads
    output = torch.zeros_like(q)
    for b in range(batch_size):
        start = int(kv_indptr[b].item())
        end = int(kv_indptr[b + 1].item())
        last = int(kv_last_page_len[b].item())
        tokens = (end - start - 1) * page_size + last
        pages = kv_indices[start:end].to(torch.long)
        k = k_cache[pages].reshape(-1, num_kv_heads, head_dim)[:tokens].to(torch.float32)
        v = v_cache[pages].reshape(-1, num_kv_heads, head_dim)[:tokens].to(torch.float32)
        qb = q[b].to(torch.float32).reshape(num_kv_heads, group, head_dim)
        p = torch.softmax(torch.einsum("hgd,thd->hgt", qb, k) * sm_scale, dim=-1)
        output[b] = torch.einsum("hgt,thd->hgd", p, v).reshape(num_qo_heads, head_dim).to(q.dtype)
    return output
