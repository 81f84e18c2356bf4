"""Draft models and their numerics: the interface (:mod:`.base`), one module per model, the registry
(:mod:`.registry`), prefix containments, polytope vertices, order mixtures and the polymatroid
reduction."""
