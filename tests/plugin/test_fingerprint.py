from pathlib import Path

from pytest_hpccomm import fingerprint as fp
from pytest_hpccomm.fabrics import select_fabric
from pytest_hpccomm.fabrics.sysfs import read_inventory

TREES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def test_fabric_fields_come_from_the_selection() -> None:
    sel = select_fabric(read_inventory(TREES / "ib-edr-mlx5" / "sys"), "ib")
    got = fp.fabric_fingerprint(sel)
    assert got["fabric"] == "ib" and got["device"] == "mlx5_0"
    assert got["link_rate_gbps"] == 100.0 and got["mtu"] == 4096
    assert got["firmware"] and got["driver"]


def test_unavailable_fabric_is_marked() -> None:
    sel = select_fabric(read_inventory(TREES / "ethernet-plain" / "sys"), "ib")
    assert fp.fabric_fingerprint(sel) == {"fabric": "ib", "fabric_available": False}


def test_host_fields_and_merge_drops_unknowns() -> None:
    host = fp.host_fingerprint()
    for key in ("kernel", "cpu_model", "cpu_cores", "python", "os", "pytest_hpccomm"):
        assert host[key], key
    merged = fp.merge([{"a": 1, "b": None}, {"b": 2, "c": None}])
    assert merged == {"a": 1, "b": 2}


def test_system_name_is_readable_stable_and_hardware_keyed() -> None:
    a = {
        "cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
        "cpu_cores": 2,
        "arch": "x86_64",
        "driver": "mlx5_core",
        "link_rate_gbps": 100.0,
        "kernel": "6.1",
    }
    name = fp.default_system_name(a)
    assert name.startswith("intel-xeon-platinum-8375c-2c-")
    assert fp.default_system_name({**a, "kernel": "6.8"}) == name  # versions are compared
    assert fp.default_system_name({**a, "link_rate_gbps": 200.0}) != name  # hardware is keyed


def test_cpu_model_reads_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\n")
    assert fp.cpu_model(info) == "AMD EPYC 7763 64-Core Processor"
