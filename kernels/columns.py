"""The summary columns the kernel families make that their names do not tell, apart from the families: a
family loads torch, and gpubench.record.columns imports this module (its DECLARERS name it) to read a summary,
which must not. kernels/common.py and kernels/allreduce.py take their SUMMARY_COLUMNS from here."""

# every family's (kernels/common.py): the check, the launch, the sizes, the unit of work, the bound
COMMON = {"check": "text", "launch": "text", "sizes": "text", "unit": "text", "bound": "text"}
# the all-reduce's (kernels/allreduce.py): its message size and regime, in words
ALLREDUCE = {"msg_text": "text", "regime_text": "text"}

# the summary columns of gpubench.kernels (gpubench.record.columns.DECLARERS names this module)
SUMMARY_COLUMNS = COMMON | ALLREDUCE
