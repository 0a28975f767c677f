"""apextui: is NVIDIA Apex really built here, and do fused kernels make training faster?

`apextui.ModelSetup` is what a function given to `apextui --model FILE.py:FUNC` returns (docs/your-model.md);
`apextui.watch(name=...)` watches your own training loop, `apextui attach NAME` shows it (docs/watch.md);
`apextui.swap_norms(model)` is the norm swap `advise` measures (Apex's, or `kernels="liger"`), for the training script
its answer goes into; so are `apextui.channels_last(batch)` (a batch's 4-D tensors to channels_last) and
`apextui.fused_linear_cross_entropy(model)` (Liger's fused linear cross-entropy in a Hugging Face causal LM).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: `python -m apextui` runs this before apextui's signal handlers are in
if TYPE_CHECKING:
    from typing import Any

    from .core.watch.hook import Watch, watch
    from .core.workloads.apply import channels_last
    from .core.workloads.liger import fused_linear_cross_entropy
    from .core.workloads.norm_swap import swap_norms
    from .core.workloads.user_model import ModelSetup

__version__ = "0.1.0"

__all__ = ["ModelSetup", "Watch", "__version__", "channels_last", "fused_linear_cross_entropy", "swap_norms", "watch"]


def __getattr__(name: str) -> Any:
    """`ModelSetup`, `watch`, `Watch`, `swap_norms`, `channels_last` and `fused_linear_cross_entropy` on first use:
    importing `apextui` itself stays free of imports (`apextui` starts its signal handling before anything else
    loads; see cli.main)."""
    if name == "ModelSetup":
        from .core.workloads.user_model import ModelSetup

        return ModelSetup
    if name in ("watch", "Watch"):
        from .core.watch import hook

        return getattr(hook, name)
    if name == "swap_norms":
        from .core.workloads.norm_swap import swap_norms

        return swap_norms
    if name == "channels_last":
        from .core.workloads.apply import channels_last

        return channels_last
    if name == "fused_linear_cross_entropy":
        from .core.workloads.liger import fused_linear_cross_entropy

        return fused_linear_cross_entropy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
