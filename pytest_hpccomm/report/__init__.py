"""Reports of one session's judged results: pure functions of (results, session info).

    terminal.summary_table         lines for pytest's terminal summary
    results_json.write_results     our JSON (schema pytest-hpccomm/results v1), load_results
    results_json.write_pytest_benchmark_json   pytest-benchmark's format (compare / list)
    junit.junit_properties         (name, value) pairs for record_property / --junitxml
    markdown.markdown_summary      $GITHUB_STEP_SUMMARY / PR comment
    html.write_html_report         self-contained page with matplotlib plots

Nothing is imported here on purpose: the plugin imports this package at pytest start-up, and
matplotlib alone costs ~0.5 s; each report module is imported when it is used.
"""
