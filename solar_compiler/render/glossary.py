"""The glossary of every term a report prints (`--explain`, and docs/report.md, which a test keeps
equal to it)."""

from __future__ import annotations

import textwrap

GLOSSARY: tuple[tuple[str, str], ...] = (
    ("source", "the program the report is about, and its kernels (one per program; a model is one)."),
    ("bound", "a lower bound on the runtime: no implementation of this program on this target can be "
              "faster. A measured time below it is a bug in the bound (or a measurement of something else)."),
    ("unfused", "fidelity: one kernel per source op (one eager PyTorch kernel each), every kernel reading "
                "its inputs from DRAM and writing its results back; its intermediates stay on chip. The "
                "sum over kernels of max(compute time, bytes / DRAM bandwidth, the latency floor if it "
                "reads)."),
    ("fused", "fidelity: the whole program as one kernel: max of the matrix time, the vector time and the "
              "compulsory bytes (each input, weight and output once) / DRAM bandwidth."),
    ("cache-aware", "fidelity: the fused terms and, per memory level, the traffic that must cross its "
                    "boundary under every schedule, given the storage behind it (docs/bounds.md)."),
    ("fidelity", "how much of the machine a bound models: unfused, fused, cache-aware (below)."),
    ("bound by", "the resource whose time is the bound: matrix (tensor/matrix cores), vector (the other "
                 "arithmetic units), memory (DRAM bandwidth), or a memory level (chip, sm) for "
                 "cache-aware bounds, or latency (the latency floor); for a module, the resource binding "
                 "the kernels that take most of its time."),
    ("per kernel", "the unfused bound is a sum over kernels, each with its own bottleneck."),
    ("fused matrix/vector/memory term", "the three times whose maximum is the fused bound."),
    ("latency", "in a target's header, its latency floor and the figure it comes from; as 'bound by', "
                "the latency floor binds."),
    ("latency floor", "one round trip of a read from outside an SM (the target's l2.latency, an L2 hit, "
                      "which no DRAM read beats): no program that reads memory finishes sooner, so every "
                      "fidelity's bound is at least this, and in the unfused bound each kernel that "
                      "reads is (eager kernels run one after another; docs/bounds.md section 9)."),
    ("cache-aware <level> term", "the traffic that must cross that level's boundary / its bandwidth."),
    ("level", "a memory level of a target, named for the storage on its fast side: chip (all on-chip "
              "storage, behind the DRAM boundary), sm (one SM's own storage, behind L2)."),
    ("matrix", "contraction FLOPs (a multiply-add = 2 FLOPs) that tensor cores may run, priced at the "
               "matrix rate of the operands' dtype."),
    ("vector", "every other arithmetic FLOP (elementwise, reductions, transcendentals), priced at the "
               "vector rate of its dtype."),
    ("FLOPs", "floating-point operations counted exactly over the iteration domain (padding taps not "
              "counted); shown with SI prefixes, rounded down; exact counts in --format=json."),
    ("bytes", "for a kernel or a module: the DRAM traffic its kernels cannot avoid (what they read that "
              "they did not produce, what later kernels or the outputs need); for the fused bound: the "
              "compulsory bytes; rounded down."),
    ("compulsory bytes", "each input and weight read once and each output written once."),
    ("FLOP/B", "arithmetic intensity: FLOPs per byte of DRAM traffic."),
    ("share", "a row's part of the unfused bound on that target."),
    ("module", "the nn.Module path the ops ran in (attn.c_attn); model is the whole program, a row "
               "'0-11 (x12)' twelve identical indexed blocks shown once with their summed figures."),
    ("(self)", "ops a module runs itself, beside its submodules (a residual add in a block's forward)."),
    ("N more", "rows too small to show, folded into one with their summed figures."),
    ("kernel", "the statements of one source op, run as one eager kernel; the unit of the unfused bound."),
    ("op", "the source op a kernel implements (addmm, softmax; sdpa: scaled_dot_product_attention); in "
           "--ops, a statement (einsum node) S<n>."),
    ("line", "the line of the source file the op comes from (file:line when another file)."),
    ("statement", "one loop nest of the loop IR, an einsum node after lift-einsum; --ops prices each "
                  "alone, so its intermediates cross DRAM there."),
    ("equation", "a statement's extended einsum: input indices -> output indices."),
    ("validation", "the loop IR was executed on random inputs and compared with the framework by one "
                   "of three methods, full (the whole loop IR at full size), sampled (the framework at full "
                   "size, the loop IR on sampled output elements through their backward slice) or reduced (a "
                   "size-reduced instance checked to be the same program); then the samples, the output "
                   "elements compared per sample, the largest relative error, and the sizes."),
    ("value-dependent", "ops whose work depends on input values (gathers, scatters, data-dependent "
                        "shapes): their bytes are counted as the traced sample touched them (the bound "
                        "holds for that sample), or with --indirect min as the fewest any index values "
                        "touch."),
    ("timing", "the timing contract the bounds assume (--cache-state): cold caches or warm caches."),
    ("step", "a training step (--step train): the loss, its parameter gradients and the optimizer's "
             "update are the program; the lines by phase under the totals split it into forward, "
             "backward and optimizer (docs/training.md)."),
    ("model", "the model of computation the bounds cover (--algorithms): default (any order, fusion and "
              "tiling, and the catalogue of rewrites: reassociated contraction trees, prefix sums as scans, "
              "repeated, symmetric and duplicated products once, a shared factor multiplied once, an "
              "operand repeated along the reduced variables summed first, one "
              "branch of a value-dependent select, one-hot contractions as gathers, gathered elements "
              "computed alone, Winograd and FFT convolution, polynomial expansion, factors folded "
              "through contractions, constant buffers computed from indices; docs/bounds.md section 0), "
              "with what the bound was "
              "priced as, or classical (the products as written, SOLAR's model)."),
    ("cold caches", "--cache-state cold (the default): every timed call starts with nothing on chip "
                    "(L2 flushed before each trial, as KernelBench does), so every input, weight and "
                    "output crosses the DRAM boundary."),
    ("warm caches", "--cache-state warm: a working set that fits the storage kept between calls (on-chip, "
                    "not per-SM) may start there; its bytes are priced at the bandwidth of the levels "
                    "inside it."),
    ("aliases", "outputs that are a view of an input, a weight or another output, or are returned twice: "
                "eager frameworks run no kernel for them, so they cost nothing."),
    ("vector work", "the vector FLOPs counted are the fewest a legal implementation needs (loop-invariant "
                    "terms once, common subexpressions once, products reassociated); the line gives the "
                    "literal count (every op at every point as written) beside it when they differ."),
    ("sums", "a sum's additions (of reductions and scans) may run on the matrix "
                                "unit instead of the vector unit, one MAC (2 FLOPs) with a ones operand "
                                "each, as FlashAttention takes its row sums; the fused terms (and each "
                                "kernel's) split them between the two units so that the larger of the "
                                "two times is least (default model only; docs/bounds.md section 0.4)."),
    ("chains", "contraction trees (chains of matrix products joined through intermediates used once) "
               "and the association order with the fewest FLOPs (opt_einsum); --reorder-chains rewrites "
               "the program to that order and checks it by execution (docs/reorder-chains.md)."),
    ("contraction trees", "the table of chains: each tree's order as written and its best order, with "
                          "FLOPs and bytes of each, their ratio, and whether the bounds use the best "
                          "one ('used')."),
    ("narrowing", "work no output needs (a masked-out region, an unused slice) was dropped before "
                  "costing (narrow-needed); 'as written' counts include it."),
    ("precision", "the precision policy (--precision; see policy), and in parentheses why, where it was "
                  "chosen for you: a SOL-ExecBench workload's tolerance (docs/sol-execbench.md)."),
    ("policy", "the accuracy f32 contractions must keep (--precision): auto lets them use TF32, as "
               "cuDNN/PyTorch do by default."),
    ("notes", "what the frontend wants you to know (a mask read as index comparisons, a cached "
              "translation); one raised many times (once per iteration of a Python loop) is one entry "
              "with its count, '... (x4096)', in the text and in the JSON."),
    ("note", "a remark on the validation (why it was partial, which capture method ran) or on the "
             "bounds (cache-aware bytes that differ per target)."),
    ("translated", "which ops a language model translated (--frontend auto with an LLM), with its "
                   "model and attempts; the rest came from templates."),
    ("LLM ops", "ops whose loop nest a language model wrote: validated on their semantics, but one "
                "algorithm among many, so not priced as written: only their plain contractions' products "
                "have a compute term, their traffic is counted (docs/llm-frontend.md section 7)."),
    ("more", "the flags that show other views of the same report."),
    ("cache size", "a what-if on-chip capacity given with --cache-size instead of the target's."),
    ("totals", "exact FLOPs (matrix and vector) and bytes: the unfused kernels' traffic, the compulsory "
               "bytes, and the cache-aware DRAM-level bytes."),
    ("rates", "the peak each dtype's work was priced at, per unit, with the datasheet figure it comes "
              "from; dense (not 2:4-sparse) rates; estimate marks a figure no datasheet prints."),
    ("memory", "a target's storage levels in words: on-chip capacity (all storage behind the DRAM "
               "boundary) and per-SM storage (each SM's own, times the SM count), each with the "
               "bandwidth that feeds it."),
    ("measured", "a time given with --measured, of the whole program or per module."),
    ("% of SOL", "100 x bound / measured: how close the measured run is to the speed of light, as "
                 "Nsight Compute's SOL %; 100% is the bound itself."),
    ("headroom", "measured / bound: the largest speed-up any implementation could still reach."),
    ("BELOW", "a measured time below a bound: a violation to investigate, never a success."),
    ("inverse roofline", "the hardware a target latency needs (--inverse-roofline): DRAM bandwidth and "
                         "matrix/vector rates, each alone ('x now': times the target's figure) and all "
                         "scaled together (scale all figures)."),
    ("traffic", "in --ops: per contraction and level, the traffic lower bound beside the traffic of the "
                "best tiled schedule found, to show how tight the bound can be."),
)


def explain_lines(width: int = 100) -> list[str]:
    """The glossary as text, each term's explanation wrapped at `width` under it."""
    out = ["terms (solar-opt --explain; docs/report.md):"]
    for term, text in GLOSSARY:
        out += textwrap.wrap(text, width=max(width, 40), initial_indent=f"  {term}: ",
                             subsequent_indent="      ", break_on_hyphens=False)
    return out


def markdown() -> str:
    """The glossary as the markdown list in docs/report.md."""
    return "\n".join(f"* **{term}**: {text}" for term, text in GLOSSARY) + "\n"
