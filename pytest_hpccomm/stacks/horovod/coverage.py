"""Horovod as the conformance suite covers it: the cases of Horovod's own test suite
(horovod/horovod test/parallel/test_torch.py, TorchTests) x the controllers that run them.

A case that needs a GPU, NCCL or several devices per rank is not applicable here; every other
case is covered by a test's `covers("horovod", ...)` marker or is a gap (a case our test only
touches in part is a gap, not a claim). docs/reference/coverage.md draws the matrix.
"""

from __future__ import annotations

from pytest_hpccomm.coverage import Taxonomy

# upstream case (test_horovod_ prefix dropped) -> what it checks
CASES = {
    "gpu_required": "fails or skips when no CUDA is available (CI guard)",
    "reinit": "init -> shutdown -> init keeps rank and size",
    "is_initialized": "is_initialized() is True after init and False after shutdown",
    "rank": "hvd.rank() equals the launcher's rank (MPI or Gloo env)",
    "size": "hvd.size() equals the launcher's size",
    "allreduce": "Sum allreduce of 1-3D int/long/float/double/half tensors equals tensor*size",
    "allreduce_average": "Average allreduce equals the input",
    "allreduce_min": "Min allreduce",
    "allreduce_max": "Max allreduce",
    "allreduce_product": "Product allreduce",
    "allreduce_inplace": "allreduce_ (in place) sums correctly",
    "allreduce_async_fused": (
        "allreduce_async on many tensors (Tensor Fusion); poll() is False at least once "
        "(really async); synchronize gives the sum"
    ),
    "allreduce_multi_gpu": "allreduce with each rank on 2 GPUs",
    "allreduce_prescale": (
        "prescale_factor applied before the sum (int in fp64, fp16 in fp32 on CPU)"
    ),
    "allreduce_postscale": "postscale_factor applied after the sum",
    "allreduce_process_sets": "allreduce limited to non-global process sets (even/odd ranks)",
    "allreduce_error": "ranks with different shape or number of dims raise an error",
    "allreduce_type_error": "ranks with different dtypes raise an error",
    "allreduce_cpu_gpu_error": "one rank on CPU and another on GPU raises an error",
    "allreduce_duplicate_name_error": "two concurrent ops with the same name raise an error",
    "allreduce_grad": "autograd backward of allreduce (sum) is correct",
    "allreduce_grad_average": "backward of average allreduce",
    "allreduce_grad_process_sets": "backward of allreduce within process sets",
    "grouped_allreduce": "grouped_allreduce sums a list of 1-3D tensors",
    "grouped_allreduce_average": "grouped_allreduce with average",
    "grouped_allreduce_inplace": "grouped_allreduce_ (in place)",
    "grouped_allreduce_process_sets": "grouped_allreduce within process sets",
    "grouped_allreduce_cpu_gpu_error": "a mixed CPU/GPU tensor list raises an error",
    "grouped_allreduce_grad": "backward of grouped_allreduce",
    "grouped_allreduce_grad_average": "backward of grouped average",
    "grouped_allreduce_grad_process_sets": "backward of grouped allreduce within process sets",
    "allgather": "allgather of equal-size 1-3D tensors (all dtypes, including uint8/int8/int16)",
    "allgather_variable_size": "allgather where first dims differ per rank",
    "allgather_async_fused": "many allgather_async with fusion, then synchronize",
    "allgather_process_sets": "allgather within process sets",
    "allgather_error": "ranks whose non-first dims differ raise an error",
    "allgather_type_error": "ranks with different dtypes raise an error",
    "allgather_duplicate_name_error": "two concurrent allgathers with the same name raise an error",
    "allgather_grad": "backward of allgather",
    "allgather_grad_process_sets": "backward of allgather within process sets",
    "grouped_allgather": "grouped_allgather of tensor lists",
    "grouped_allgather_process_sets": "grouped_allgather within process sets",
    "grouped_allgather_grad": "backward of grouped_allgather",
    "broadcast": "broadcast from each root, 1-3D, all dtypes",
    "broadcast_inplace": "broadcast_ (in place) from each root",
    "broadcast_process_sets": "broadcast within process sets",
    "broadcast_error": "ranks with different shapes raise an error",
    "broadcast_type_error": "ranks with different dtypes raise an error",
    "broadcast_rank_error": "ranks naming different root ranks raise an error",
    "broadcast_duplicate_name_error": "two concurrent broadcasts with the same name raise an error",
    "broadcast_grad": "backward of broadcast (root gets grad*size)",
    "broadcast_grad_process_sets": "backward of broadcast within process sets",
    "alltoall": "alltoall with explicit splits, 1-3D; also checks received_splits",
    "alltoall_equal_split": "alltoall with default (equal) splits",
    "alltoall_splits_on_gpu": "splits tensor placed on GPU",
    "alltoall_process_sets": "alltoall within process sets",
    "alltoall_type_error": "ranks with different dtypes raise an error",
    "alltoall_equal_split_length_error": (
        "first dim not a multiple of size, with default splits, raises an error"
    ),
    "alltoall_splits_error": "sum(splits) larger than the first dim raises an error",
    "alltoall_splits_type_error": "a non-int32 splits tensor raises an error",
    "alltoall_rank_error": "ranks whose non-first dims differ raise an error",
    "alltoall_grad": "backward of alltoall with explicit splits",
    "alltoall_equal_split_grad": "backward of alltoall with equal splits",
    "alltoall_grad_process_sets": "backward of alltoall within process sets",
    "broadcast_state": (
        "broadcast_parameters and broadcast_optimizer_state make model and optimizer "
        "state equal on every rank (many optimizers)"
    ),
    "broadcast_state_gpu": "the same with CUDA tensors",
    "broadcast_state_options": "optimizer options (lr, momentum, ...) are broadcast",
    "broadcast_state_no_grad": "broadcast of optimizer state for params without grad",
    "broadcast_object": "broadcast_object of a Python object (pickled)",
    "broadcast_object_process_sets": "broadcast_object within process sets",
    "allgather_object": "allgather_object of Python objects",
    "compression_fp16": "Compression.fp16 compress and decompress, dtype round-trip",
    "force_allreduce": "DistributedOptimizer allreduces all grads, including unused params",
    "model_parallelism": "model split across 2 GPUs per rank",
    "delta_optimizer": "Adasum delta optimizer",
    "duplicate_names": "duplicate named_parameters are rejected",
    "dynamic_requires_grad": "grads toggled on and off dynamically still synchronize",
    "gradient_clipping": "synchronize(), clip, then step() under skip_synchronize",
    "synchronize_step_warning": "synchronize() then step() without skip_synchronize warns",
    "no_named_parameters": "named_parameters=None is accepted",
    "missing_named_parameters": "partial named_parameters raises an error",
    "join_allreduce": "hvd.join(): ranks that ran out of data contribute zeros to allreduce",
    "join_allgather": "join during allgather raises the expected error",
    "join_broadcast": "join during broadcast",
    "sync_batch_norm": "SyncBatchNorm equals BatchNorm on the full batch",
    "timeline_api": "start_timeline/stop_timeline write a valid JSON timeline",
    "optimizer_no_named_parameters": "DistributedOptimizer without named params works",
    "sparse_embeddings": "sparse embedding gradients are aggregated (sparse_as_dense / allgather)",
    "async_sparse_allreduce": (
        "sparse_allreduce_async (allgather of indices and values) equals dense allreduce"
    ),
    "async_sparse_allreduce_process_sets": "the same within process sets",
    "optimizer_process_sets": "DistributedOptimizer restricted to a process set",
    "process_set_barrier_op": "barrier within a process set stalls its members",
    "global_barrier_op": "global hvd.barrier() stalls all ranks",
    "barrier_with_multiple_collectives": (
        "barrier mixed with async collectives keeps results correct"
    ),
    "reducescatter": "reducescatter sum of 1-3D tensors",
    "reducescatter_average": "reducescatter average",
    "reducescatter_prescale": "reducescatter with prescale",
    "reducescatter_postscale": "reducescatter with postscale",
    "reducescatter_scalar_error": "reducescatter of a 0-D tensor raises an error",
    "reducescatter_adasum": "op=Adasum raises an error",
    "reducescatter_async_fused": "reducescatter_async with fusion",
    "reducescatter_error": "ranks with different shapes raise an error",
    "reducescatter_type_error": "ranks with different dtypes raise an error",
    "reducescatter_duplicate_name_error": "same name in concurrent ops raises an error",
    "reducescatter_grad": "backward of reducescatter (sum)",
    "reducescatter_grad_average": "backward of reducescatter (average)",
    "reducescatter_process_sets": "reducescatter within process sets",
    "reducescatter_grad_process_sets": "backward of reducescatter within process sets",
    "grouped_reducescatter": "grouped_reducescatter sum",
    "grouped_reducescatter_average": "grouped_reducescatter average",
    "grouped_reducescatter_prescale": "grouped_reducescatter with prescale",
    "grouped_reducescatter_postscale": "grouped_reducescatter with postscale",
    "grouped_reducescatter_scalar_error": "grouped_reducescatter of 0-D tensors raises an error",
    "grouped_reducescatter_process_sets": "grouped_reducescatter within process sets",
    "grouped_reducescatter_grad": "backward of grouped_reducescatter",
}

# case -> why it does not apply to CPU-only ranks
NOT_APPLICABLE = {
    "gpu_required": "GPU-only guard",
    "allreduce_multi_gpu": "needs >=2 GPUs per rank",
    "allreduce_cpu_gpu_error": "needs GPU",
    "grouped_allreduce_cpu_gpu_error": "needs GPU",
    "alltoall_splits_on_gpu": "needs GPU/NCCL>=2.7",
    "broadcast_state_gpu": "needs GPU",
    "model_parallelism": "needs >=2 GPUs",
    "delta_optimizer": "needs GPU and MPI Adasum",
    "sync_batch_norm": "GPU-only (skipTest without CUDA)",
}
CONTROLLERS = {"gloo": "Horovod's Gloo controller", "mpi": "Horovod's MPI controller"}
# (case, controller) -> why that controller does not run it (upstream skips it there)
NOT_APPLICABLE_CELLS = {
    ("reinit", "mpi"): "MPI cannot be initialized again after shutdown (upstream: Gloo only)",
}


def not_applicable(case: str, controller: str) -> str | None:
    return NOT_APPLICABLE.get(case) or NOT_APPLICABLE_CELLS.get((case, controller))


TAXONOMY = Taxonomy(
    stack="horovod",
    title="Horovod: the cases of its own test suite (test_torch.py) x the controllers",
    families=CASES,
    classes=CONTROLLERS,
    not_applicable=not_applicable,
    modules=(
        "hpccomm_suites.horovod.test_conformance_horovod",
        "hpccomm_suites.horovod.test_conformance_horovod_api",
    ),
    rows="upstream cases",
    columns="controllers",
)
