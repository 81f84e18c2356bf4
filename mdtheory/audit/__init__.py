"""Audit anyone's verifier: running it (:mod:`.verifier`, :func:`mdtheory.audit`) apart from the
statistics that judge its output (:mod:`.statistics`), the watchdog that bounds its calls
(:mod:`.watchdog`), and the cross-validation of the batched torch rules against their numpy rules
(:mod:`.crossval`)."""
