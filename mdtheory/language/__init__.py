"""Language models: the model interface (:mod:`.langmodel`), logits to probabilities (:mod:`.logits`),
the char-LSTM (:mod:`.lm`), Hugging Face checkpoints (:mod:`.hf`) and drafters (:mod:`.drafters`).
The block-efficiency simulations that run them are :mod:`mdtheory.blocks.simulation`."""
