"""Sequence-level (block and tree) speculative verification."""

from .audit import BlockAuditResult, audit_block

__all__ = ["BlockAuditResult", "audit_block"]
