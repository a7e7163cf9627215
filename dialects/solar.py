"""The `solar` dialect: module-level containers the pipeline keeps beside the program.

`solar.as_written` holds the kernels as they were before a transform that changes the work they do
(`narrow-needed` keeps the program as written here, and the report prices both); its kernels are
not programs of the module (`analysis/graphs.py` reads only top-level kernels and graphs).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, Dialect, Operation, Region
from xdsl.irdl import IRDLOperation, irdl_op_definition, region_def, traits_def
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class AsWrittenOp(IRDLOperation):
    """The program as written, before the module's transforms changed its work."""

    name = "solar.as_written"
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "attr-dict-with-keyword $body"

    def __init__(self, ops: Sequence[Operation] = ()):
        super().__init__(regions=[Region(Block(ops))])

    def verify_(self) -> None:
        from solar_compiler.dialects.loop import KernelOp

        for o in self.body.block.ops:
            if not isinstance(o, KernelOp):
                raise VerifyException(f"solar.as_written holds loop.kernel ops only, not '{o.name}'")


Solar = Dialect("solar", [AsWrittenOp], [])
