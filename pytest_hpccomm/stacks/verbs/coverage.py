"""Verbs as the conformance suite covers it: the cases of rdma-core's own Python tests
(linux-rdma/rdma-core tests/, pyverbs; the provider-neutral modules) x the software providers
the suite runs on (rxe: Soft-RoCE; siw: soft iWARP), each in a guest of Debian's kernel.

A case that needs what a provider does not have (the reason is given) is not applicable; a
vendor module (mlx5, efa, CUDA) is left out. Every other case is covered by a test's
`covers("verbs", ...)` marker or is a gap (a case our test only touches in part is a gap, not
a claim). docs/reference/coverage.md draws the matrix.
"""

from __future__ import annotations

from pytest_hpccomm.coverage import Taxonomy

# module (test_ prefix dropped) -> test class -> its test methods, as upstream names them
UPSTREAM: dict[str, dict[str, list[str]]] = {
    "device": {
        "DeviceTest": [
            "test_dev_list",
            "test_open_dev",
            "test_query_device",
            "test_query_pkey",
            "test_get_pkey_index",
            "test_query_gid",
            "test_query_gid_table",
            "test_query_gid_table_bad_flow",
            "test_query_gid_ex",
            "test_query_gid_ex_bad_flow",
            "test_query_device_ex",
            "test_phys_port_cnt_ex",
            "test_query_port",
            "test_query_port_bad_flow",
            "test_query_port_speed",
        ],
        "DMTest": [
            "test_create_dm",
            "test_destroy_dm",
            "test_create_dm_bad_flow",
            "test_destroy_dm_bad_flow",
            "test_dm_write",
            "test_dm_write_bad_flow",
            "test_dm_read",
            "test_multi_process_alloc_dm",
        ],
        "SharedDMTest": [
            "test_import_dm",
        ],
    },
    "pd": {
        "PDTest": [
            "test_alloc_pd",
            "test_dealloc_pd",
            "test_multiple_pd_creation",
            "test_destroy_pd_twice",
        ],
    },
    "cq": {
        "CQAPITest": [
            "test_create_cq",
            "test_create_cq_with_comp_channel",
            "test_create_cq_bad_flow",
        ],
        "CQTest": [
            "test_resize_cq",
        ],
    },
    "cq_events": {
        "CqEventsTestCase": [
            "test_cq_events_ud",
            "test_cq_events_rc",
        ],
    },
    "addr": {
        "AHTest": [
            "test_create_ah",
            "test_create_ah_roce",
            "test_destroy_ah",
        ],
    },
    "qp": {
        "QPTest": [
            "test_create_rc_qp_no_attr",
            "test_create_uc_qp_no_attr",
            "test_create_ud_qp_no_attr",
            "test_create_raw_qp_no_attr",
            "test_create_rc_qp_with_attr",
            "test_create_uc_qp_with_attr",
            "test_create_ud_qp_with_attr",
            "test_create_raw_qp_with_attr",
            "test_create_rc_qp_ex_no_attr",
            "test_create_uc_qp_ex_no_attr",
            "test_create_ud_qp_ex_no_attr",
            "test_create_raw_qp_ex_no_attr",
            "test_create_rc_qp_ex_with_attr",
            "test_create_uc_qp_ex_with_attr",
            "test_create_ud_qp_ex_with_attr",
            "test_create_raw_qp_ex_with_attr",
            "test_create_raw_qp_ex_with_illegal_caps_max_send_wr",
            "test_create_raw_qp_ex_with_illegal_caps_max_send_sge",
            "test_create_raw_qp_ex_with_illegal_caps_max_recv_sge",
            "test_create_raw_qp_ex_with_illegal_caps_max_recv_wr",
            "test_query_rc_qp",
            "test_query_uc_qp",
            "test_query_ud_qp",
            "test_query_raw_qp",
            "test_query_data_in_order",
            "test_modify_ud_qp",
            "test_create_ud_qp_with_privileged_qkey",
            "test_raw_qp_rate_limit_modify",
        ],
        "RCQPTest": [
            "test_modify_rc_qp_rd_atomic",
        ],
    },
    "qpex": {
        "QpExTestCase": [
            "test_qp_ex_ud_send",
            "test_qp_ex_ud_zero_size",
            "test_qp_ex_rc_send",
            "test_qp_ex_xrc_send",
            "test_qp_ex_ud_send_imm",
            "test_qp_ex_rc_send_imm",
            "test_qp_ex_xrc_send_imm",
            "test_qp_ex_rc_flush",
            "test_qp_ex_rc_flush_type_violate",
            "test_qp_ex_rc_atomic_write",
            "test_qp_ex_rc_rdma_write",
            "test_qp_ex_rc_rdma_write_imm",
            "test_qp_ex_rc_rdma_write_zero_size",
            "test_qp_ex_rc_rdma_read",
            "test_qp_ex_rc_rdma_read_zero_size",
            "test_qp_ex_rc_atomic_cmp_swp",
            "test_qp_ex_rc_atomic_fetch_add",
            "test_qp_ex_rc_bind_mw",
            "test_post_receive_qp_state_bad_flow",
            "test_post_send_qp_state_bad_flow",
            "test_full_rq_bad_flow",
            "test_rq_with_larger_sgl_bad_flow",
        ],
    },
    "mr": {
        "MRTest": [
            "test_mr_rereg_addr",
            "test_mrex_rereg_addr",
            "test_mr_rereg_atomic",
            "test_mr_rereg_access",
            "test_mrex_rereg_access",
            "test_mr_rereg_access_bad_flow",
            "test_mr_rereg_pd",
            "test_reg_mr_bad_flags",
            "test_reg_mrex_bad_flags",
            "test_reg_mrex_inval_params",
        ],
        "MWTest": [
            "test_mw_type1",
            "test_mw_ex_type1",
            "test_invalidate_mw_type1",
            "test_mw_type2",
            "test_mw_type2_invalidate_local",
            "test_mw_type2_invalidate_remote",
            "test_mw_type2_invalidate_dealloc",
            "test_reg_mw_wrong_type",
        ],
        "DeviceMemoryAPITest": [
            "test_create_dm_mr",
            "test_dm_bad_access",
            "test_dm_bad_registration",
            "test_dm_export_dmabuf_fd",
        ],
        "DmaBufMRTest": [
            "test_dmabuf_reg_mr",
            "test_dmabuf_dereg_mr",
            "test_dmabuf_dereg_mr_twice",
            "test_dmabuf_reg_mr_bad_flags",
            "test_dmabuf_write",
            "test_dmabuf_read",
            "test_dmabuf_lkey",
            "test_dmabuf_rkey",
        ],
        "DmaBufTestCase": [
            "test_dmabuf_rc_traffic",
            "test_dmabuf_rdma_traffic",
        ],
        "DeviceMemoryTest": [
            "test_dm_traffic",
            "test_dm_remote_traffic",
            "test_dm_remote_write_traffic_imm",
            "test_dm_remote_read_traffic",
            "test_dm_atomic_fetch_add",
            "test_dm_atomic_cmp_swp",
        ],
    },
    "atomic": {
        "AtomicTest": [
            "test_atomic_cmp_and_swap",
            "test_atomic_fetch_and_add",
            "test_xrc_atomic_fetch_and_add",
            "test_xrc_atomic_cmp_and_swap",
            "test_atomic_invalid_qp_access",
            "test_atomic_invalid_mr_access",
            "test_atomic_non_aligned_addr",
            "test_atomic_invalid_lkey",
            "test_atomic_invalid_rkey",
        ],
    },
    "srq": {
        "SrqTestCase": [
            "test_rc_srq_traffic",
            "test_resize_srq",
            "test_modify_srq_limit",
        ],
    },
    "rdmacm": {
        "CMTestCase": [
            "test_rdmacm_sync_traffic",
            "test_rdmacm_async_traffic",
            "test_rdmacm_async_reject_traffic",
            "test_rdmacm_async_multicast_traffic",
            "test_rdmacm_async_ex_multicast_traffic",
            "test_rdmacm_async_ex_leave_multicast_traffic",
            "test_rdmacm_async_traffic_external_qp",
            "test_rdmacm_async_udp_traffic",
            "test_rdmacm_async_read",
            "test_rdmacm_async_write",
            "test_rdmacm_async_resolve_addrinfo",
        ],
    },
}


def _case(module: str, cls: str, method: str) -> str:
    return f"{module}.{cls}.{method.removeprefix('test_')}"


# upstream case -> what it checks (its name, spelled out)
CASES = {
    _case(module, cls, method): f"{module}: {method.removeprefix('test_').replace('_', ' ')}"
    for module, classes in UPSTREAM.items()
    for cls, methods in classes.items()
    for method in methods
}
PROVIDERS = {
    "rxe": "Soft-RoCE (rdma_rxe), RoCE v2 over a veth, in the guest",
    "siw": "soft iWARP (siw) over a veth, in the guest",
}

# classes no software provider has: (why) for both columns
_NEITHER = {
    "DMTest": "device memory (ibv_alloc_dm) is an mlx5 feature",
    "SharedDMTest": "device memory (ibv_alloc_dm) is an mlx5 feature",
    "DeviceMemoryAPITest": "device memory (ibv_alloc_dm) is an mlx5 feature",
    "DeviceMemoryTest": "device memory (ibv_alloc_dm) is an mlx5 feature",
    "DmaBufMRTest": "dma-buf MRs need an exporter (a GPU); neither provider registers them",
    "DmaBufTestCase": "dma-buf MRs need an exporter (a GPU); neither provider registers them",
}
# words of a case's name that siw (iWARP: reliable connected QPs only, no atomics, no memory
# windows, no P_Keys or multicast) cannot run, with why
_SIW_LACKS = {
    "_ud_": "iWARP has RC QPs only (no UD)",
    "ud_qp": "iWARP has RC QPs only (no UD)",
    "_uc_": "iWARP has RC QPs only (no UC)",
    "xrc": "iWARP has RC QPs only (no XRC)",
    "udp": "iWARP has RC QPs only (no UD)",
    "multicast": "iWARP has no multicast",
    "pkey": "iWARP has no partition keys",
    "atomic": "siw has no atomics (atomic_cap = NONE)",
    "mw_": "siw has no memory windows",
    "bind_mw": "siw has no memory windows",
    "flush": "siw has no FLUSH",
    "bad_flow": "",  # decided per case below
}


def not_applicable(case: str, provider: str) -> str | None:
    module, cls, name = case.split(".")
    if cls in _NEITHER:
        return _NEITHER[cls]
    if "xrc" in name.split("_") and provider == "rxe":
        return "rdma-core's rxe provider has no XRC: ibv_open_xrcd answers EOPNOTSUPP"
    if name.startswith("mr_rereg"):
        return (
            "rdma-core implements no ibv_rereg_mr for rxe or siw: libibverbs answers "
            "EOPNOTSUPP, and upstream's case skips"
        )
    if name == "resize_cq" and provider == "siw":
        return "rdma-core implements no ibv_resize_cq for siw: libibverbs answers EOPNOTSUPP"
    if module == "qpex" and provider == "siw" and not name.endswith("bad_flow"):
        return "rdma-core's siw provider creates no extended QP (ibv_qp_ex): EOPNOTSUPP"
    if name == "resize_srq" and provider == "siw":
        return "siw does not claim IBV_DEVICE_SRQ_RESIZE (upstream's case skips)"
    if "raw" in name.split("_"):
        return "RAW_PACKET QPs: neither software provider has them"
    if provider == "rxe" and name in (
        "qp_ex_rc_flush",
        "qp_ex_rc_flush_type_violate",
        "qp_ex_rc_atomic_write",
    ):
        return "FLUSH and ATOMIC_WRITE came to rxe in Linux 6.2; the guest runs Debian 12's 6.1"
    if provider != "siw":
        return None
    if cls == "AHTest" or cls == "MWTest":
        return (
            "iWARP has no address handles (UD only)"
            if cls == "AHTest"
            else "siw has no memory windows"
        )
    if name == "query_gid_ex_bad_flow":
        return "siw's GID table has one entry, always populated: no empty index to query"
    if module == "qpex" and name.endswith("bad_flow"):
        return "upstream runs it on UD QPs; iWARP has RC QPs only"
    if name == "cq_events_ud" or name == "modify_ud_qp":
        return "iWARP has RC QPs only (no UD)"
    if name == "modify_rc_qp_rd_atomic":  # RDMA READ depths: siw has them (its IRD/ORD)
        return None
    padded = f"_{name}_"
    for word, why in _SIW_LACKS.items():
        if why and word in padded:
            return why
    return None


def cells(*cases: str) -> list[str]:
    """The "case:provider" cells of `cases` (module.Class.case) on the providers where they
    apply: what a test's covers("verbs", ...) marker names."""
    return [f"{c}:{p}" for c in cases for p in PROVIDERS if not not_applicable(c, p)]


# cases the guests cannot run: their pyverbs (Debian 12's rdma-core 44) lacks the call
_NEWER_PYVERBS = {
    "device.DeviceTest.get_pkey_index": "Context.get_pkey_index came with rdma-core 52",
    "device.DeviceTest.query_port_speed": "Context.query_port_speed came with rdma-core 63",
    "mr.MRTest.mrex_rereg_addr": "MREx (ibv_reg_mr_ex) came with rdma-core 60",
    "mr.MRTest.mrex_rereg_access": "MREx (ibv_reg_mr_ex) came with rdma-core 60",
    "mr.MRTest.reg_mrex_bad_flags": "MREx (ibv_reg_mr_ex) came with rdma-core 60",
    "mr.MWTest.mw_ex_type1": "MREx (ibv_reg_mr_ex) came with rdma-core 60",
    "mr.MRTest.reg_mrex_inval_params": "MREx (ibv_reg_mr_ex) came with rdma-core 60",
    "rdmacm.CMTestCase.rdmacm_async_resolve_addrinfo": (
        "rdma_resolve_addrinfo came with rdma-core 60 (librdmacm RDMACM_1.4)"
    ),
    "qp.QPTest.query_data_in_order": (
        "its RETURN_CAPS flag (the case's second half) came with rdma-core 46"
    ),
}
OUT_OF_SCOPE = {
    (case, provider): f"{why}; the guests run Debian 12's rdma-core 44"
    for case, why in _NEWER_PYVERBS.items()
    for provider in PROVIDERS
    if not_applicable(case, provider) is None
}

TAXONOMY = Taxonomy(
    stack="verbs",
    title="Verbs: the cases of rdma-core's own tests (pyverbs) x the software providers",
    families=CASES,
    classes=PROVIDERS,
    not_applicable=not_applicable,
    out_of_scope=OUT_OF_SCOPE,
    modules=(
        "hpccomm_suites.verbs.test_conformance_api",
        "hpccomm_suites.verbs.test_conformance_data",
        "hpccomm_suites.verbs.test_conformance_errors",
        "hpccomm_suites.verbs.test_conformance_events",
        "hpccomm_suites.verbs.test_conformance_mr",
        "hpccomm_suites.verbs.test_conformance_mw",
        "hpccomm_suites.verbs.test_conformance_qp",
        "hpccomm_suites.verbs.test_conformance_qpex",
        "hpccomm_suites.verbs.test_conformance_rdmacm",
        "hpccomm_suites.verbs.test_conformance_srq",
        "hpccomm_suites.verbs.test_host_to_host",
    ),
    rows="upstream cases",
    columns="providers",
)
