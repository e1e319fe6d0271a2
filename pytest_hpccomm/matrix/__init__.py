"""The release matrix: a stack's conformance suites over a set of its releases (release x
property: pass, fail with the shrunk example, known defect, skip with its reason) and a paired
A/B run between each two adjacent releases of one line (`hpccomm matrix mpi ...`)."""
