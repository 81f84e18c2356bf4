"""Language models: the model interface (:mod:`.langmodel`), logits to probabilities (:mod:`.logits`),
the char-LSTM (:mod:`.lm`), Hugging Face checkpoints (:mod:`.hf`), drafters (:mod:`.drafters`) and
block-efficiency simulations (:mod:`.blockeff`)."""
