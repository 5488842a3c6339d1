"""Training: the LightningModule every task trains with, its schedules, the divergence check, how many threads a step
gets, stop requests, the attention health it measures, and the Lightning callbacks of a run."""
