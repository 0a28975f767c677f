"""apextui: is NVIDIA Apex really built here, and do fused kernels make training faster?"""

__version__ = "0.1.0"
