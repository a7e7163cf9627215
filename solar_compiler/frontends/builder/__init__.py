"""What the op templates of every framework frontend build loop IR with; imports no template and no
frontend (torch and jax templates share it; `captured_program.py` is the captured program it reads).

* `values`: `Val` (a tensor value read element by element: a stored tensor, a view, a generator)
  and `Loop` (one loop of a statement being built);
* `translator`: `Translator`, the state of one translation, and its `emit`;
* `exprs`: typed scalar-expression builders and torch's dtype promotion;
* `index_maps`: dimension normalisation, broadcasting, reshape and window index maps;
* `statements`: the statement shapes the families share (map, reduce, copy, pad).
* `resample`: torch's interpolation arithmetic (source coordinates, cubic-convolution weights).
"""
