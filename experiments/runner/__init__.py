"""The experiment runner behind experiments/run: scenario files, the simulator and guest backends,
metrics, the report and plots."""
