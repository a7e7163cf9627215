"""Model specs at full size (docs/model-zoo.md): each command through `solar-opt` in a child process,
its wall and CPU seconds and the peak resident memory of its process tree (targets: < 2 min, < 8 GB),
the fused bound and the validation; then the Llama-2-7B decode bytes checked against the hand
derivation from its shipped configuration (weights + KV cache + named small terms). Not a unit test:
times depend on the host (and on its load: report CPU seconds beside wall seconds).

    .venv/bin/python benchmarks/model_zoo.py                 # the done-when command (Llama-2-7B decode)
    .venv/bin/python benchmarks/model_zoo.py --all           # every shipped causal LM, prefill + decode
    .venv/bin/python benchmarks/model_zoo.py --hw B200 hf:gpt2 --phase prefill --seq 1024
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from solar_compiler.frontends.zoo.spec import find_shipped, is_causal, shipped_names

DONE_WHEN = ["hf:llama-2-7b", "--phase", "decode", "--kv-len", "4096", "--batch", "1", "--dtype", "fp16"]


def run(spec_args: list[str], hw: str) -> dict:
    """One command: its JSON report, wall and CPU seconds, peak RSS of the process tree (GB)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        tool = str(Path(sys.executable).parent / "solar-opt")
        argv = [tool, *spec_args, "--lift-einsum", "--roofline=fused", "--hw", hw, "--format", "json",
                "--quiet", "-o", str(out)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        env = {**os.environ, "XDG_CACHE_HOME": tmp}  # cold: no translation cache hit
        p = subprocess.run(argv, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        row = {"args": " ".join(spec_args), "hw": hw, "rc": p.returncode, "wall_s": round(wall, 1),
               "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
               "peak_gb": round(after.ru_maxrss / 2**20, 2)}  # largest process of the tree so far (KiB)
        if p.returncode != 0:
            return {**row, "error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?"}
        r = json.loads(out.read_text())
    b = r["bounds"][hw]
    v = r["validation"]
    return {**row, "fused_s": b["fused_s"], "bound_by": b["fused_bottleneck"],
            "bytes_fused": r["totals"]["bytes_fused"], "flops": r["totals"]["flops"],
            "validated": v.get("validated"), "sizes": v.get("sizes")}


def llama_decode_bytes(name: str, batch: int, kv_len: int, dtype_bytes: int) -> dict[str, int]:
    """Fused-bound bytes of a Llama-family decode step, term by term, from the shipped config."""
    c = find_shipped(name)["config"]
    h, inter, n, heads, vocab = (c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"],
                                 c["num_attention_heads"], c["vocab_size"])
    kvh = c.get("num_key_value_heads", heads)
    d = h // heads
    per_layer = 2 * h * heads * d + 2 * h * kvh * d + 3 * h * inter + 2 * h
    return {
        "weights (every layer, final norm, lm_head)": dtype_bytes * (n * per_layer + h + vocab * h),
        "KV cache read": dtype_bytes * n * 2 * batch * kvh * kv_len * d,
        "embedding rows": dtype_bytes * batch * h,
        "token ids (int64)": 8 * batch,
        "new K/V rows written": dtype_bytes * n * 2 * batch * kvh * d,
        "logits": dtype_bytes * batch * vocab,
        "rotary inv_freq (f32)": 4 * d // 2,
    }


def main(argv: list[str]) -> int:
    hw = "H100_SXM"
    if "--hw" in argv:
        i = argv.index("--hw")
        hw = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if argv == ["--all"]:
        commands = []
        for name in shipped_names():
            if not is_causal(find_shipped(name)["config"]["architectures"][0]):
                commands.append([f"hf:{name}", "--dtype", "fp16"])
                continue
            commands.append([f"hf:{name}", "--phase", "prefill", "--seq", "2048", "--dtype", "fp16"]
                            if name != "gpt2" else [f"hf:{name}", "--phase", "prefill", "--dtype", "fp16"])
            for batch in ("1", "16"):
                kv = "4096" if name != "gpt2" else "1000"
                commands.append([f"hf:{name}", "--phase", "decode", "--kv-len", kv, "--batch", batch,
                                 "--dtype", "fp16"])
    else:
        commands = [argv or DONE_WHEN]
    failed = 0
    for args in commands:
        row = run(args, hw)
        print(json.dumps(row), flush=True)
        failed += row["rc"] != 0
        if args == DONE_WHEN and row["rc"] == 0:
            terms = llama_decode_bytes("llama-2-7b", 1, 4096, 2)
            for k, v in terms.items():
                print(f"  {k:45s} {v:>16,}")
            print(f"  {'sum':45s} {sum(terms.values()):>16,}   report: {row['bytes_fused']:,}")
            failed += sum(terms.values()) != row["bytes_fused"]
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
