"""Ascend's collective API (npu_bridge.hccl, hicann/tensorflow tf_adapter/python/npu_bridge/hccl) on CPU: the TF ops
HcomAllReduce, HcomAllGather, HcomBroadcast and HcomReduceScatter with the adapter's names, inputs and attributes,
whose kernels run graph_ir/distributed's MPI engine. A script ported to Ascend's API runs as CPU ranks under
mpiexec with `from npu_bridge.hccl import hccl_ops` changed to `from tf_plugin.hccl import hccl_ops`.

Modules: hccl_ops (the wrappers and the registered gradient), engine (the kernels' collective engine).
docs/distributed.md, "Ascend's collective API as TF ops", tells more.
"""

from tf_plugin.hccl import engine, hccl_ops

engine.register()

__all__ = ["engine", "hccl_ops"]
