"""What a session is asked to do, as data: scenario files, the graded client, the faults a
scenario arms, and the contract's clauses and thresholds."""
