"""Programs the parity tests run (each in its own directory), and the tests' shared helpers."""
