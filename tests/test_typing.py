"""The public API is typed (the package ships py.typed): every parameter and return is annotated,
and the annotations resolve."""

import inspect
import typing

import pytest

import mdtheory as md
from mdtheory.rules import SelectionRule, make_rule

PUBLIC = [md.optimal_acceptance, md.alpha_star, md.optimal_block_efficiency, md.make_draft_model, make_rule,
          md.audit, SelectionRule.__init__, SelectionRule.select,
          SelectionRule.enumerate, SelectionRule.exact_acceptance, SelectionRule.exact_output_law,
          SelectionRule.monte_carlo, SelectionRule.conditional, SelectionRule.closed_form_acceptance]


@pytest.mark.parametrize("func", PUBLIC, ids=lambda f: f.__qualname__)
def test_public_api_is_annotated(func):
    hints = typing.get_type_hints(func)
    params = [name for name in inspect.signature(func).parameters if name != "self"]
    assert set(params) <= set(hints), sorted(set(params) - set(hints))
    assert "return" in hints
