"""Statistics: intervals, multiplicity, bounded minimisation, permutation nulls, the latent-truth label model."""
