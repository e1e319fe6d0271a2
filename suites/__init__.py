"""The suites: installed with the package as pytest_hpccomm.suites (pytest --pyargs
pytest_hpccomm.suites), run from a checkout as suites/."""
