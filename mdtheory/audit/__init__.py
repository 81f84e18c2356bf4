"""Audit anyone's verifier: running it (:mod:`.verifier`, :func:`mdtheory.audit`) apart from the
statistics that judge its output (:mod:`.statistics`)."""
