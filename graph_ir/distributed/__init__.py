"""Data-parallel runs of GE graphs: N processes (ranks), each a graph_ir.Session running the same graph, whose Hcom
ops (HcomAllReduce, HcomAllGather, HcomBroadcast, HcomReduce, HcomReduceScatter; graph_ir/opset/hcom.py) exchange
tensors through MPI, as HCCL does between Ascend devices.

    import graph_ir
    session = graph_ir.Session(group=graph_ir.distributed.world())   # launched as: mpiexec -n 2 python step.py

Modules: group (the Group, HcomError, the timeout), waiting (bounded waits on non-blocking collectives), runs
(world(); a graph joining the group; the group a run sees), collectives (the collectives on arrays, and the
Hcom executors running them; tf_plugin.hccl's TF kernels run them too). docs/distributed.md
tells how to launch, what happens when a rank fails, and what each op computes here.
"""

from graph_ir.distributed.group import DEFAULT_TIMEOUT, TIMEOUT_ENV, Group, HcomError
from graph_ir.distributed.runs import world

__all__ = ["DEFAULT_TIMEOUT", "TIMEOUT_ENV", "Group", "HcomError", "world"]
