"""apextui: is NVIDIA Apex really built here, and do fused kernels make training faster?

`apextui.ModelSetup` is what a function given to `apextui --model FILE.py:FUNC` returns (docs/your-model.md).
"""

from .core.workloads.user_model import ModelSetup

__version__ = "0.1.0"

__all__ = ["ModelSetup", "__version__"]
