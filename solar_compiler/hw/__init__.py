"""Hardware targets: sourced peak rates and memory levels that speed-of-light bounds divide by.

* ``model``: ``HwTarget``, ``Figure``, ``MemoryLevel``, ``Emulation``;
* ``pricing``: how a dtype is priced under a precision policy (the fastest method that meets its
  accuracy contract), naming the figure it used;
* ``schema``: the YAML loader and validator (one-line errors naming file and field);
* ``registry``: the bundled ``hw_targets/*.yaml``, ``load_target`` and ``parse_hw_list``;
* ``host``: the ``host`` target, calibrated on this machine and cached.

Importing this package is cheap: numpy and torch are imported only inside ``calibrate_host``.
See docs/hw-targets.md.
"""

from solar_compiler.hw.errors import HwTargetError
from solar_compiler.hw.host import calibrate_host, host_cache_path
from solar_compiler.hw.model import HOST, HOST_SOURCE, UNITS, Emulation, Figure, HwTarget, MemoryLevel
from solar_compiler.hw.pricing import DTYPES, PRECISIONS, Priced, operand_bits
from solar_compiler.hw.registry import available_targets, load_target, parse_hw_list

__all__ = [
    "DTYPES",
    "HOST",
    "HOST_SOURCE",
    "PRECISIONS",
    "UNITS",
    "Emulation",
    "Figure",
    "HwTarget",
    "HwTargetError",
    "MemoryLevel",
    "Priced",
    "available_targets",
    "operand_bits",
    "calibrate_host",
    "host_cache_path",
    "load_target",
    "parse_hw_list",
]
