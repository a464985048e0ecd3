"""The training benchmark's networks, their weights and inputs, as Cells; the peers (train_peers.py) write
the same function in their own frameworks.

    BERT-large encoder stack   `layers` post-LN encoder layers (bench/bert.py's BertLayer, composite ops:
                               LayerNorm, Softmax, tanh-GeLU), loss = mean((y - target)^2) against a fixed
                               target; no dropout
    full BERT-large            token + position embeddings (nn.Embedding, vocabulary 30522), an embedding
                               LayerNorm, the encoder stack, and an MLM output projection to the vocabulary;
                               loss = softmax cross-entropy against fixed token labels (mean over tokens)

Both train with nn.AdamW (torch's formula: lr 1e-4, eps 1e-6, weight decay 0.01 on every parameter) in one
TrainOneStepCell: a call is a step. Weights come from a numpy generator with a fixed seed (normal * 0.02,
LayerNorm gamma 1 and beta 0, biases 0), so every implementation starts from the same values.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from graphkernel.tools.bench.bert import LINEARS, LN_EPSILON, NORMS, BertLayer
from graphkernel.cell import Cell
from graphkernel.nn import AdamW, CellList, Embedding, SoftmaxCrossEntropyWithLogits, TrainOneStepCell
from graphkernel.ops import operations as P
from graphkernel.tensor import Parameter

f32 = np.float32
LR, EPS, WEIGHT_DECAY, BETAS = 1e-4, 1e-6, 0.01, (0.9, 0.999)
SEED = 0


@dataclass(frozen=True)
class Shape:
    """A network of the bench: encoder width, heads, FFN width, sequence, batch, layers; vocab > 0 adds the
    embeddings and the MLM projection (the full BERT-large)."""
    hidden: int = 1024
    heads: int = 16
    ffn: int = 4096
    seq: int = 128
    batch: int = 2
    layers: int = 1
    vocab: int = 0

    def label(self) -> str:
        what = f"BERT-large {self.layers} layers + embeddings/MLM" if self.vocab else \
            f"BERT encoder x{self.layers}"
        return f"{what} b{self.batch} s{self.seq} h{self.hidden}"

    def matmul_gflop(self) -> float:
        """MatMul/BatchMatMul work of one step (forward, and twice that backward)."""
        rows = self.batch * self.seq
        per_layer = 2 * rows * self.hidden * (4 * self.hidden + 2 * self.ffn) \
            + 2 * 2 * self.batch * self.seq * self.seq * self.hidden
        forward = self.layers * per_layer + 2 * rows * self.hidden * self.vocab
        return 3 * forward / 1e9

    def asdict(self) -> dict:
        return asdict(self)


def layer_shapes(shape: Shape) -> dict[str, tuple]:
    h, f = shape.hidden, shape.ffn
    wide = {"intermediate": (h, f), "output": (f, h)}
    out = {}
    for stem in LINEARS:
        w = wide.get(stem, (h, h))
        out[f"{stem}.weight"], out[f"{stem}.bias"] = w, (w[1],)
    for stem in NORMS:
        out[f"{stem}.gamma"], out[f"{stem}.beta"] = (h,), (h,)
    return out


def make_weights(shape: Shape) -> dict[str, np.ndarray]:
    """Every weight by a flat name: "layer3.attention.query.weight", "embeddings.word", "mlm.weight", ..."""
    rng = np.random.default_rng(SEED)

    def init(name, dims):
        if name.endswith("gamma"):
            return np.ones(dims, f32)
        if name.endswith(("beta", "bias")):
            return np.zeros(dims, f32)
        return (rng.standard_normal(dims) * 0.02).astype(f32)

    out = {}
    if shape.vocab:
        out["embeddings.word"] = init("word", (shape.vocab, shape.hidden))
        out["embeddings.position"] = init("position", (shape.seq, shape.hidden))
        out["embeddings.ln.gamma"], out["embeddings.ln.beta"] = init("gamma", (shape.hidden,)), \
            init("beta", (shape.hidden,))
    for i in range(shape.layers):
        for stem, dims in layer_shapes(shape).items():
            out[f"layer{i}.{stem}"] = init(stem, dims)
    if shape.vocab:
        out["mlm.weight"], out["mlm.bias"] = init("mlm", (shape.hidden, shape.vocab)), \
            init("bias", (shape.vocab,))
    return out


def make_inputs(shape: Shape) -> dict[str, np.ndarray]:
    """x (or token ids), the additive attention mask (the second sequence's last quarter masked out) and
    the fixed target (or labels)."""
    rng = np.random.default_rng(SEED + 1)
    mask = np.zeros((shape.batch, 1, 1, shape.seq), f32)
    mask[-1, ..., shape.seq - shape.seq // 4:] = -10000.0
    if shape.vocab:
        ids = rng.integers(0, shape.vocab, (shape.batch, shape.seq)).astype(np.int32)
        labels = rng.integers(0, shape.vocab, (shape.batch * shape.seq,)).astype(np.int32)
        return {"x": ids, "mask": mask, "target": labels}
    x = rng.standard_normal((shape.batch, shape.seq, shape.hidden)).astype(f32)
    target = rng.standard_normal((shape.batch, shape.seq, shape.hidden)).astype(f32)
    return {"x": x, "mask": mask, "target": target}


def layer_weights(weights: dict, i: int) -> dict[str, np.ndarray]:
    prefix = f"layer{i}."
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


class EncoderStack(Cell):
    def __init__(self, shape: Shape, weights: dict):
        super().__init__()
        self.layers = CellList([BertLayer(layer_weights(weights, i), shape.heads, composite=True)
                                for i in range(shape.layers)])

    def construct(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return x


class StackLoss(Cell):
    """mean((stack(x) - target)^2)."""

    def __init__(self, shape: Shape, weights: dict):
        super().__init__(auto_prefix=False)
        self.encoder = EncoderStack(shape, weights)

    def construct(self, x, mask, target):
        diff = self.encoder(x, mask) - target
        return P.ReduceMean()(diff * diff, ())


class PretrainLoss(Cell):
    """Embeddings, the encoder stack, the MLM projection, cross-entropy against the labels."""

    def __init__(self, shape: Shape, weights: dict):
        super().__init__(auto_prefix=False)
        self.shape = shape
        self.word = Embedding(shape.vocab, shape.hidden)
        self.word.embedding_table.set_data(weights["embeddings.word"].copy())
        self.position = Parameter(weights["embeddings.position"].copy(), name="position")
        self.ln_gamma = Parameter(weights["embeddings.ln.gamma"].copy(), name="ln_gamma")
        self.ln_beta = Parameter(weights["embeddings.ln.beta"].copy(), name="ln_beta")
        self.layer_norm = P.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=LN_EPSILON)
        self.encoder = EncoderStack(shape, weights)
        self.mlm_weight = Parameter(weights["mlm.weight"].copy(), name="mlm_weight")
        self.mlm_bias = Parameter(weights["mlm.bias"].copy(), name="mlm_bias")
        self.loss = SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, ids, mask, labels):
        s = self.shape
        x = self.layer_norm(self.word(ids) + self.position, self.ln_gamma, self.ln_beta)[0]
        y = P.Reshape()(self.encoder(x, mask), (s.batch * s.seq, s.hidden))
        logits = P.MatMul()(y, self.mlm_weight) + self.mlm_bias
        return self.loss(logits, labels)


def train_step(shape: Shape, weights: dict) -> Cell:
    net = PretrainLoss(shape, weights) if shape.vocab else StackLoss(shape, weights)
    opt = AdamW(net.trainable_params(), LR, beta1=BETAS[0], beta2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY)
    return TrainOneStepCell(net, opt)
