"""The unlearning methods, one small class per file, found by name in :data:`METHODS`.

Adding a method: subclass :class:`GradientUnlearner` (state the loss) or
:class:`ReinforcedUnlearner` / :class:`Unlearner` (state the arithmetic), give it a pydantic
``Params`` whose defaults are the paper's grid, decorate it with :func:`register_method`, and
import its module here.
"""

from .base import (
    METHODS,
    GradientUnlearner,
    MethodParams,
    ReinforcedParams,
    ReinforcedUnlearner,
    Session,
    Step,
    Unlearner,
    UnlearnError,
    get_method,
    register_method,
)
from .ga import GAParams, GradientAscent
from .npo import NPO, NPOParams
from .tv import TaskVector, TVParams, negate_task_vector
from .whp import WHPForward, WHPParams, WhoIsHarryPotter, whp_distribution, whp_logprobs

__all__ = [
    "METHODS", "GradientUnlearner", "MethodParams", "ReinforcedParams", "ReinforcedUnlearner", "Session", "Step",
    "Unlearner", "UnlearnError", "get_method", "register_method",
    "GAParams", "GradientAscent", "NPO", "NPOParams", "TaskVector", "TVParams", "negate_task_vector",
    "WHPForward", "WHPParams", "WhoIsHarryPotter", "whp_distribution", "whp_logprobs",
]
