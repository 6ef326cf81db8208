"""Trainer loop, evaluation, run folders."""
