"""When the capture stops a forward that reads tensor values into Python (`.item()`, `float(t)`,
`if t > 0:`), and why (issue 21).

A forward that computes in Python from values (a dot product as `a[i].item() * b[i].item()` in a
loop) returns results the capture would bake in as constants of the traced sample; validation's
fresh samples reject those, but a loop of thousands of reads first costs minutes (export turns each
read into an unbacked symbol: 4,096 reads took 270 s). Such a loop must be recognised in seconds.
A reference may also read a few values per iteration of a loop over a batch to *choose tensor work*:
FlashInfer's paged attention reads `kv_indptr[b]`, `kv_indptr[b + 1]` and `kv_last_page_len[b]` per
request, then gathers, multiplies and normalises tensors (2-3 reads and ~17 tensor ops a request;
a batch of 64 reads 128-192 values). The two differ in the tensor work between reads, not in the
number of reads, and the rule says so (deterministic, unlike a time limit on a loaded machine):

* the first `MAX_VALUE_READS` reads are always allowed;
* past them, the last `MAX_VALUE_READS` reads must come with at least `OPS_PER_READ` recorded tensor
  ops each (views excluded: `a[i]` is one); the `.item()` dot product records none and stops at its
  65th read, as before;
* never more than `MAX_LOOP_READS` reads (a loop with a little tensor work per element of a large
  tensor is still stopped: 8,192 reads of the dot product take about 10 s to record).

Export keeps the first limit alone (`MAX_VALUE_READS` unbacked symbols): past it, the dispatch
recorder runs, which applies the whole rule and names the line.
"""

from __future__ import annotations

from collections import deque

MAX_VALUE_READS = 64  # reads always allowed (and export's limit on unbacked symbols)
OPS_PER_READ = 2  # past them: recorded tensor ops per read, over the last MAX_VALUE_READS reads
MAX_LOOP_READS = 8192  # reads never allowed beyond this


class ValueReads:
    """The reads of one forward and the tensor ops recorded between them."""

    def __init__(self) -> None:
        self.count = 0
        self.ops = 0
        self._marks: deque[int] = deque(maxlen=MAX_VALUE_READS)  # `ops` at each of the last reads

    def op(self) -> None:
        """A tensor op (not a view) was recorded."""
        self.ops += 1

    def read(self) -> str | None:
        """Count one read; None while the rule allows it, else the clause saying why not (it follows
        "forward reads tensor values into Python")."""
        self.count += 1
        if self.count > MAX_LOOP_READS:
            return f"more than {MAX_LOOP_READS} times"
        since = self.ops - self._marks[0] if len(self._marks) == MAX_VALUE_READS else None
        self._marks.append(self.ops)
        if since is not None and since < OPS_PER_READ * MAX_VALUE_READS:
            return (f"more than {MAX_VALUE_READS} times, with {since} tensor ops over the last "
                    f"{MAX_VALUE_READS} reads (under {OPS_PER_READ} per read)")
        return None
