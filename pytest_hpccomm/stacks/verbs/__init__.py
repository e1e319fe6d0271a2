"""The ibverbs stack: pyverbs peers (peer.py, engine.py, bench.py) driven over the control
channel (driver.py, perf.py), perftest cross-checks (perftest.py), its pytest plugin
(plugin.py). Tests: hpccomm_suites/verbs. SoftRoCE / siw links: fabrics/provision.py."""
