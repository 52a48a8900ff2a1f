"""The ground truth: what the GPU could do and what the work really achieved.

Datasheet and measured sustained peaks (peaks), GPU time from CUDA events (timing), and the FLOPs a
step of a model does (flops). Nothing here samples a metric: these are the numbers the metrics are
held against.
"""
