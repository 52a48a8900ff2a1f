"""`gpubench top`: every GPU of the machine, live, with no job wrapped and no root.

Per GPU the ladder (GPU-Util, SM active, occupancy, tensor and DRAM active), power against its limit, the SM
clock and memory, the processes on it, and one verdict word (verdict). It reads NVML and the GPM counters and
nothing else (sampling): it never creates a CUDA context, so looking costs the GPUs nothing. The frame and the
JSON document (render), the terminal's keys (keys), and the command's modes (cmd) are apart; the options and
the help that teaches the columns are in options, which loads no GPU library.
"""
