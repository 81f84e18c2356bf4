"""The papers' claims checked: exact rational and double-description computations (:mod:`.exact`,
:mod:`.dd`), symbolic identities (:mod:`.symbolic`) and the claim runner (:mod:`.verify`)."""
