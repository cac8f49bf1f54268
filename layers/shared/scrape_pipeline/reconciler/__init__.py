"""The reconciler: sweeps that find the jobs the webhooks missed, and finish runs."""
