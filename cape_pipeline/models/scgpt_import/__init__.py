"""Released scGPT checkpoints (``args.json``, ``vocab.json``, ``best_model.pt``): the reader
that rebuilds scGPT's own model with CAPE added (:mod:`.checkpoint`) and the warm start of our
scGPT backbone from one, with its gene vocabulary (:mod:`.warm_start`)."""
