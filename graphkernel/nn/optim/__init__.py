"""Optimizers with MindSpore's names, arguments and formulas (each module's docstring gives them)."""
from graphkernel.nn.optim.optimizer import Optimizer, OptimizerError
from graphkernel.nn.optim.sgd import SGD, Momentum
from graphkernel.nn.optim.adam import Adam, AdamW, AdamWeightDecay
from graphkernel.nn.optim.lamb import Lamb

__all__ = ["Optimizer", "OptimizerError", "SGD", "Momentum", "Adam", "AdamWeightDecay", "AdamW", "Lamb"]
