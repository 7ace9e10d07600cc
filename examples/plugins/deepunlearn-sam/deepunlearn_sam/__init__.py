"""``npo_sam``: NPO with sharpness-aware minimisation (SAM), a deepunlearn method plug-in.

This module is what the entry point names: the method's :class:`MethodSpec` and its parameters,
torch-free, so ``deepunlearn`` lists, plans and checks sweeps of the method without importing it.
The class lives in :mod:`deepunlearn_sam.method` and is imported only when a run needs it.
"""

from pydantic import Field

from deepunlearn.unlearn.methods import NPOParams
from deepunlearn.unlearn.methods.catalog import MemoryProfile, MethodSpec


class NPOSAMParams(NPOParams):
    """NPO's parameters and SAM's radius ``rho``."""

    rho: float = Field(0.01, ge=0, description="SAM's perturbation radius (L2 norm over the trained weights)")


SPEC = MethodSpec(
    name="npo_sam",
    kind="steps",  # grid values are optimiser steps along one trajectory, as NPO's
    grid=(1, 2, 4, 8, 16),
    # a gradient method (optimiser state alive while probing); a SAM step also holds the
    # perturbation and the first gradient, two weights-sized tensors
    memory=MemoryProfile(optimizer_while_probing=True, step_copies=2),
    cls="deepunlearn_sam.method:NPOSAM",
    params="deepunlearn_sam:NPOSAMParams",  # what a sweep's [params.npo_sam] is checked against
    label="NPO-SAM",
    colour="#17becf",
    description="NPO with sharpness-aware minimisation (perturb by rho along the gradient, step with the "
                "gradient taken there)",
)
