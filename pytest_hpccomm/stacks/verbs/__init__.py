"""The ibverbs stack: pyverbs peers (peer/: __main__, engine, bench) driven over the control
channel (driver.py, perf.py), perftest cross-checks (perftest.py), its pytest plugin
(plugin.py). Tests: hpccomm_suites/verbs. SoftRoCE / siw links: fabrics/provision.py."""
