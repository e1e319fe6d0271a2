"""TensorFlow as the conformance suites cover it: the cases of TensorFlow's collective ops tests
(tensorflow/python/kernel_tests/collective_ops_test.py, v2 ops; tensorflow/python/ops/
collective_ops_test.py, v1 ops) x the collective implementation the suites run.

A case that needs what these machines lack (the reason is given) is not applicable; every
other case is covered by a test's `covers("tf", ...)` marker or is a gap (a case our test
only touches in part is a gap, not a claim). docs/reference/coverage.md draws the matrix.
"""

from __future__ import annotations

from pytest_hpccomm.coverage import Taxonomy, by_row

CASES = {
    "v2.CollectiveOpsTest.testReduce": (
        "all_reduce (v1 and v2) over 1 device = x and over 2 devices = 2x"
    ),
    "v2.CollectiveOpsTest.testGather": (
        "all_gather over 1, 2 and 16 devices concatenates in device order"
    ),
    "v2.CollectiveOpsTest.testBroadcast": (
        "broadcast_send/broadcast_recv deliver the sender's tensor"
    ),
    "v2.CollectiveOpsTest.testAllToAll": "all_to_all_v2 exchanges halves (v1 not implemented)",
    "v2.CollectiveOpsTest.testInstanceKeyScopedUnderGroupKey": (
        "the same instance_key in two groups does not collide"
    ),
    "v2.CollectiveOpsTest.testCollectiveGroupSizeOne": (
        "group_size=1 all_reduce/all_gather return the input"
    ),
    "v2.CollectiveOpsTest.testCollectiveInvalidKey": (
        "reusing an instance_key for a different collective type raises InternalError"
    ),
    "v2.CollectiveOpsTest.testMultipleGroups": "groups of size 2 and 3 reduce correctly",
    "v2.AllReduceWithSubdivisionsTest.testReduce": (
        "all_reduce_v2 with max_subdivs_per_device in -1, 0, 16"
    ),
    "v2.XlaTest.testReduce": "all_reduce_v2 inside jit_compile tf.function across threads",
    "v2.XlaTest.testReduceSameGraph": (
        "multi-device all_reduce in one jit function fails with a resource error"
    ),
    "v2.GroupAssignmentTest.testGroupAssignmentBeforeAllReduce": (
        "assign_group_v2 then all_reduce_v2 (jit on and off)"
    ),
    "v2.GroupAssignmentTest.testTwoGroupAssignmentBeforeAllReduce": (
        "two successive group assignments, then reduces"
    ),
    "v2.AbortCollectiveOpsTest.testAbortGroupParamsResolution": (
        "abort_collective_ops during group resolution gives UnavailableError; later ops fail "
        "at once; works again after reset"
    ),
    "v2.AbortCollectiveOpsTest.testAbortInstanceParamsResolution": (
        "abort during instance resolution; fail-fast; reset"
    ),
    "v2.AbortCollectiveOpsTest.testAbortCommunication": "abort during execution; fail-fast; reset",
    "v2.OpCancellationTest.testOpErrorNotAbortIfNoCollective": (
        "v1: an op error (EOF) with no active collective does not abort the executor"
    ),
    "v2.OpCancellationTest.testOpErrorNotAbortIfNoCollectiveV2": "v2: the same",
    "v2.OpCancellationTest.testOpErrorAbortWithCollective": (
        "v1: an op error while a collective is pending aborts; the next collective gives "
        "CancelledError"
    ),
    "v2.OpCancellationTest.testOpErrorNotAbortWithCollectiveV2": (
        "v2: an op error does not abort; later collectives proceed"
    ),
    "v2.OpCancellationTest.testCancelDuringParamResolutionV2": (
        "CancellationManager cancels a collective stuck in param resolution"
    ),
    "v2.TimeoutTest.testTimeout": (
        "a group that never fills gives DeadlineExceeded 'timed out during execution' after "
        ">= timeout"
    ),
    "v2.TimeoutTest.testParamResolutionAfterTimeout": (
        "timeout while 'waiting for other workers'; a late peer then also fails at once"
    ),
    "v2.TimeoutTest.testExecutionAfterTimeout": (
        "after a resolved group, an execution timeout; a late peer fails at once"
    ),
    "v2.CommunicationHintTest.testNCCLFallbackOnCPU": (
        "communication_hint=NCCL on CPU falls back to RING"
    ),
    "v2.OrderingTest.testOrdering": "ordering_token chains collectives (control inputs) per device",
    "v2.InputPipelineTest.testMap": "all_reduce_v2 inside tf.data map across 2 CPUs",
    "v2.InvalidInputTest.testInvalidGroupKey": "a non-scalar group_key raises InvalidArgumentError",
    "v2.InvalidInputTest.testInvalidGroupSize": "group_size=-2 raises InvalidArgumentError",
    "v2.InvalidInputTest.testInvalidInstanceKey": (
        "a non-scalar instance_key raises InvalidArgumentError"
    ),
    "v2.CollectiveOpsV3Test.testGroupInitialization": "initialize_communicator on 2 CPUs",
    "v2.CollectiveOpsV3Test.testAllReduceV3": "all_reduce_v3 with a communicator handle",
    "v2.CollectiveOpsV3Test.testAllToAllV3": "all_to_all_v3",
    "v2.CollectiveOpsV3Test.testAllToAllV3DifferentUserRank": (
        "all_to_all_v3 with user ranks swapped from device order"
    ),
    "v2.CollectiveOpsV3Test.testAllToAllV3DifferentUserRankWithTensorInput": (
        "the same with tensor inputs (upstream FIXME b/214407359)"
    ),
    "v1.CollectiveOpTest.testCollectiveReduce": (
        "all_reduce Add/Div (mean) over 2 CPUs with collective_graph_key set"
    ),
    "v1.CollectiveOpTest.testCollectiveAutoGraphKey": "the same without an explicit graph key",
    "v1.CollectiveOpTest.testFp16Reduce": "float16 mean all_reduce",
    "v1.CollectiveOpTest.testCollectiveMultipleConcurrentReduce": (
        "2 concurrent instances with deterministic sequential execution"
    ),
    "v1.CollectiveOpTest.testNcclHintFallbackToRingReduce": (
        "NCCL hint on a non-GPU build falls back to ring"
    ),
    "v1.CollectiveOpTest.testSimpleWhile": "all_reduce inside while_loop with ScopedAllocator",
    "v1.CollectiveOpTest.testWhileMultipleAllReduce": "2 all_reduces per iteration in while_loop",
    "v1.CollectiveOpTest.testWhileWithScopedAllocator": (
        "while_loop output plus constant reduced with the scoped allocator"
    ),
    "v1.CollectiveOpTest.testCollectiveReduceScalar": "scalar all_reduce",
    "v1.CollectiveOpTest.testCollectiveReduceMaximum": "merge_op=Max",
    "v1.CollectiveOpTest.testCollectiveReduceMinimum": "merge_op=Min",
    "v1.CollectiveOpTest.testCollectiveBroadcast": "broadcast_send/recv",
    "v1.CollectiveOpTest.testCollectiveGather": "all_gather of 1D, 2D and 3D tensors",
    "v1.CollectiveOpTest.testCollectiveGatherShapeMismatch": (
        "a re-run with a different shape gives InvalidArgument 'Shape mismatch'"
    ),
    "v1.CollectiveOpTest.testCollectiveGatherShapeMismatchAcrossDevices": (
        "members with different non-0 dims give 'Shape mismatch'"
    ),
    "v1.CollectiveOpTest.testCollectiveGatherPolymorphicShape": (
        "placeholder with shape [None]; a second run with shorter inputs works"
    ),
    "v1.CollectiveOpTest.testCollectiveGroupSizeMismatch": (
        "members giving group_size 2 vs 3 give InternalError"
    ),
    "v1.CollectiveOpTest.testCollectiveTensorsHaveNoDeviceSpecified": (
        "inputs without a device string still reduce (trace-time check)"
    ),
    "v1.CollectiveOpTest.testCollectiveGroupSizeOne": "group_size=1 reduce/gather return the input",
}

# case -> why it does not apply here
NOT_APPLICABLE = {
    "v2.XlaTest.testReduce": "required_physical_gpus=2 (XLA GPU)",
    "v2.XlaTest.testReduceSameGraph": "required_physical_gpus=2",
    "v2.GroupAssignmentTest.testGroupAssignmentBeforeAllReduce": (
        "required_physical_gpus=2 (the op itself is device-agnostic; a CPU port is possible)"
    ),
    "v2.GroupAssignmentTest.testTwoGroupAssignmentBeforeAllReduce": "required_physical_gpus=2",
}
RUNS = {"ring": "CPU collectives (RING), two worker tasks over TensorFlow's gRPC"}


TAXONOMY = Taxonomy(
    stack="tf",
    title="TensorFlow: the cases of its collective ops tests x the collective implementation",
    families=CASES,
    classes=RUNS,
    not_applicable=by_row(NOT_APPLICABLE),
    modules=(
        "hpccomm_suites.tf.test_collectives_tf",
        "hpccomm_suites.tf.test_conformance_tf",
        "hpccomm_suites.tf.test_parameter_server_tf",
    ),
    rows="upstream cases",
    columns="implementations",
)
